#include "models/loaders/expected_weights.h"

#include "kernels/check.h"

namespace tessera::loaders {

std::vector<WeightSpec> expected_weights(const ModelConfig& config) {
  const int64_t hidden = config.hidden_size;
  const int64_t q_rows = config.num_heads * config.head_dim;
  const int64_t kv_rows = config.num_kv_heads * config.head_dim;
  const int64_t intermediate = config.intermediate_size;
  std::vector<WeightSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {config.vocab_size, hidden}});
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    const std::string prefix = fmt::format("model.layers.{}.", layer);
    specs.push_back({prefix + "input_layernorm.weight", {hidden}});
    specs.push_back({prefix + "self_attn.q_proj.weight", {q_rows, hidden}, true});
    specs.push_back({prefix + "self_attn.k_proj.weight", {kv_rows, hidden}, true});
    specs.push_back({prefix + "self_attn.v_proj.weight", {kv_rows, hidden}});
    if (config.attention_bias) {
      specs.push_back({prefix + "self_attn.q_proj.bias", {q_rows}, true});
      specs.push_back({prefix + "self_attn.k_proj.bias", {kv_rows}, true});
      specs.push_back({prefix + "self_attn.v_proj.bias", {kv_rows}});
    }
    if (config.qk_norm) {
      specs.push_back({prefix + "self_attn.q_norm.weight", {config.head_dim}});
      specs.push_back({prefix + "self_attn.k_norm.weight", {config.head_dim}});
    }
    specs.push_back({prefix + "self_attn.o_proj.weight", {hidden, q_rows}});
    specs.push_back({prefix + "post_attention_layernorm.weight", {hidden}});
    specs.push_back({prefix + "mlp.gate_proj.weight", {intermediate, hidden}});
    specs.push_back({prefix + "mlp.up_proj.weight", {intermediate, hidden}});
    specs.push_back({prefix + "mlp.down_proj.weight", {hidden, intermediate}});
  }
  specs.push_back({"model.norm.weight", {hidden}});
  if (!config.tie_word_embeddings) specs.push_back({"lm_head.weight", {config.vocab_size, hidden}});
  return specs;
}

void throw_missing_tensor(const ModelConfig& config, const std::string& where,
                          const WeightSpec& spec, const std::string& stored_name) {
  const std::string described = stored_name == spec.name
                                    ? fmt::format("'{}'", spec.name)
                                    : fmt::format("'{}' ({})", stored_name, spec.name);
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
  for (const WeightSpec& spec : expected_weights(config)) {
    std::optional<FoundTensor> found = find(spec);
    if (!found) throw_missing_tensor(config, missing_from, spec, spec.name);
    const std::string described = found->stored_name == spec.name
                                      ? fmt::format("'{}'", spec.name)
                                      : fmt::format("'{}' ({})", found->stored_name, spec.name);
    TESSERA_REQUIRE(found->stored_dtype_name.empty(),
                    "{}: tensor {} is stored as {}, which this loader cannot read; supported: F32, "
                    "F16, BF16",
                    found->file, described, found->stored_dtype_name);
    TESSERA_REQUIRE(found->stored.shape == spec.shape,
                    "{}: tensor {} has shape {} but the config expects {} (hidden {}, heads {}/{} "
                    "kv, head_dim {}, intermediate {}, vocab {})",
                    found->file, described, shape_str(found->stored.shape), shape_str(spec.shape),
                    config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim,
                    config.intermediate_size, config.vocab_size);
    TESSERA_REQUIRE(is_floating(found->stored.dtype),
                    "{}: tensor {} is stored as {}; weights must be F32, F16 or BF16", found->file,
                    described, dtype_name(found->stored.dtype));
    const RowOrder order =
        stored_rope_pairs && spec.rope_rows ? RowOrder::rope_pairs_to_halves : RowOrder::as_stored;
    tensors.emplace(spec.name, materialize(found->stored, options, order, config.head_dim));
  }
  return tensors;
}

}  // namespace tessera::loaders
