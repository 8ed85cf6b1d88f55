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
  // The FP8 KV cache's scales, where the checkpoint gives them (models/loaders/fp8_weights.h).
  if (weights.config.fp8.kv_cache_scales) {
    auto scalar = [&](const std::string& name) {
      return weights.get(name).to(kCPU).to_floats().at(0);
    };
    for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
      const std::string prefix = fmt::format("model.layers.{}.self_attn.", layer);
      kv_cache_scales_.push_back({scalar(prefix + "k_scale"), scalar(prefix + "v_scale")});
    }
  }
}

void CausalLM::count_weight_bytes(std::initializer_list<const Tensor*> tensors, WeightRole role) {
  count_weight_bytes(std::vector<const Tensor*>(tensors), role);
}

void CausalLM::count_weight_bytes(const std::vector<const Tensor*>& tensors, WeightRole role) {
  for (const Tensor* tensor : tensors) {
    if (!tensor->defined()) continue;
    weight_bytes_ += tensor->nbytes();
    weight_bytes_by_dtype_[tensor->dtype()] += tensor->nbytes();
    if (role == WeightRole::experts) expert_weight_bytes_ += tensor->nbytes();
    if (role == WeightRole::gathered_table) gathered_table_bytes_ += tensor->nbytes();
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

KVCacheScales CausalLM::kv_cache_scales(int64_t layer) const {
  TESSERA_CHECK(layer >= 0 && layer < config_.num_layers, "layer {} of {}", layer,
                config_.num_layers);
  return kv_cache_scales_.empty() ? KVCacheScales{} : kv_cache_scales_.at(layer);
}

}  // namespace tessera
