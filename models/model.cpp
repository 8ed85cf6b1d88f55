#include "models/model.h"

#include "runtime/check.h"

namespace tessera {

CausalLM::CausalLM(const ModelWeights& weights, const std::vector<WeightSpec>& expected,
                   int64_t max_positions)
    : config_(weights.config), parallel_(weights.parallel), max_positions_(max_positions) {
  config_.validate(weights.source);
  TESSERA_CHECK(!expected.empty(), "{}: the model expects no weights", weights.source);
  for (const WeightSpec& spec : expected) {
    Shape shape = spec.shape;
    // A rank's shard of the vocabulary (the config is already the rank's for the rest).
    if (parallel_.enabled() &&
        (spec.name == "model.embed_tokens.weight" || spec.name == "lm_head.weight"))
      shape[0] = vocab_shard_rows(config_.vocab_size, parallel_.size);
    weights.get(spec.name, shape);
  }
  const Tensor& first = weights.get(expected.front().name);
  dtype_ = first.dtype();
  device_ = first.device();
}

void CausalLM::count_weight_bytes(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* tensor : tensors)
    if (tensor->defined()) weight_bytes_ += tensor->nbytes();
}

}  // namespace tessera
