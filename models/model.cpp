#include "models/model.h"

#include <algorithm>

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
  device_ = first.device();
  // The run dtype is the float weights' (norms stay float); a quantized embedding has its format.
  dtype_ = first.dtype();
  for (const WeightSpec& spec : expected) {
    const DType dtype = weights.get(spec.name).dtype();
    if (!is_quantized(dtype)) {
      dtype_ = dtype;
      break;
    }
  }
  TESSERA_REQUIRE(!is_quantized(dtype_),
                  "{}: every weight is quantized; the model needs its norms "
                  "in F32, F16 or BF16",
                  weights.source);
}

void CausalLM::count_weight_bytes(std::initializer_list<const Tensor*> tensors) {
  count_weight_bytes(std::vector<const Tensor*>(tensors));
}

void CausalLM::count_weight_bytes(const std::vector<const Tensor*>& tensors) {
  for (const Tensor* tensor : tensors) {
    if (!tensor->defined()) continue;
    weight_bytes_ += tensor->nbytes();
    weight_bytes_by_dtype_[tensor->dtype()] += tensor->nbytes();
  }
}

std::string CausalLM::weight_formats_str() const {
  std::vector<std::pair<size_t, DType>> by_size;
  for (const auto& [dtype, bytes] : weight_bytes_by_dtype_) by_size.emplace_back(bytes, dtype);
  std::sort(by_size.rbegin(), by_size.rend());
  std::vector<std::string> parts;
  for (const auto& [bytes, dtype] : by_size)
    parts.push_back(fmt::format("{} {:.1f} MiB", dtype_name(dtype), bytes / 1048576.0));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace tessera
