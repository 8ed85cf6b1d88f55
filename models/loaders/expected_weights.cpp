#include "models/loaders/expected_weights.h"

#include <atomic>

#include "models/architecture_registry.h"
#include "models/loaders/fp8_weights.h"
#include "runtime/check.h"
#include "runtime/cpu/parallel.h"

namespace tessera::loaders {
namespace {

// "'name'", or "'stored' (name)" where the file calls the tensor otherwise (GGUF).
std::string described_tensor(const WeightSpec& spec, const std::string& stored_name) {
  return stored_name == spec.name ? fmt::format("'{}'", spec.name)
                                  : fmt::format("'{}' ({})", stored_name, spec.name);
}

// The first element holding one of e4m3's NaN codes (0x7f, 0xff), or -1: checked on every core,
// as an 8B checkpoint holds 7 GB of codes.
int64_t first_e4m3_nan(const StoredTensor& stored) {
  const auto* codes = reinterpret_cast<const uint8_t*>(stored.data);
  const int64_t count = shape_numel(stored.shape);
  std::atomic<int64_t> first{count};
  cpu::parallel_for(count, int64_t{1} << 20, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end && i < first.load(std::memory_order_relaxed); ++i) {
      if ((codes[i] & 0x7f) != 0x7f) continue;
      int64_t seen = first.load();
      while (i < seen && !first.compare_exchange_weak(seen, i)) {
      }
      return;
    }
  });
  return first.load() < count ? first.load() : -1;
}

}  // namespace

void throw_missing_tensor(const ModelConfig& config, const std::string& where,
                          const WeightSpec& spec, const std::string& stored_name) {
  const std::string described = described_tensor(spec, stored_name);
  throw Error(fmt::format(
      "{}: tensor {} of shape {} is missing; the config ({}, {} layers{}{}{}) expects it", where,
      described, shape_str(spec.shape), config.architecture, config.num_layers,
      config.tie_word_embeddings ? ", tied embeddings" : ", untied lm_head",
      config.attention_bias ? ", q/k/v biases" : "", config.qk_norm ? ", q/k norms" : ""));
}

std::map<std::string, Tensor> load_expected_weights(
    const ModelConfig& config, const std::string& missing_from,
    const std::function<std::optional<FoundTensor>(const WeightSpec&)>& find,
    const LoadOptions& options, bool stored_rope_pairs) {
  std::map<std::string, Tensor> tensors;
  for (const WeightSpec& spec : tessera::expected_weights(config)) {
    std::optional<FoundTensor> found = find(spec);
    if (!found) throw_missing_tensor(config, missing_from, spec, spec.name);
    const std::string described = described_tensor(spec, found->stored_name);
    TESSERA_REQUIRE(found->stored_dtype_name.empty(),
                    "{}: tensor {} is stored as {}, which this loader cannot read; supported: {}",
                    found->file, described, found->stored_dtype_name, found->readable_dtype_names);
    TESSERA_REQUIRE(found->stored.shape == spec.shape,
                    "{}: tensor {} has shape {} but the config expects {} (hidden {}, heads {}/{} "
                    "kv, head_dim {}, intermediate {}, vocab {})",
                    found->file, described, shape_str(found->stored.shape), shape_str(spec.shape),
                    config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim,
                    config.intermediate_size, config.vocab_size);
    TESSERA_REQUIRE(is_floating(found->stored.dtype) || is_quantized(found->stored.dtype) ||
                        found->stored.dtype == DType::f8_e4m3,
                    "{}: tensor {} is stored as {}; weights must be F32, F16, BF16 or quantized",
                    found->file, described, dtype_name(found->stored.dtype));
    TESSERA_REQUIRE(found->stored.dtype != DType::f8_e4m3 || is_projection_weight(spec.name),
                    "{}: tensor {} is FP8; only the projections (q/k/v/o, gate/up/down) may be",
                    found->file, described);
    if (found->stored.dtype == DType::f8_e4m3) {
      const int64_t nan = first_e4m3_nan(found->stored);
      TESSERA_REQUIRE(nan < 0, "{}: FP8 tensor {} holds a NaN (code 0x{:02x}) at element {}",
                      found->file, described,
                      reinterpret_cast<const uint8_t*>(found->stored.data)[nan < 0 ? 0 : nan], nan);
    }
    const RowOrder order =
        stored_rope_pairs && spec.rope_rows ? RowOrder::rope_pairs_to_halves : RowOrder::as_stored;
    tensors.emplace(spec.name, materialize(found->stored, options, order, config.head_dim));
  }
  return tensors;
}

}  // namespace tessera::loaders
