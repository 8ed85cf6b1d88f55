#include "models/decoder_weights.h"

#include "compile/ops/ops.h"
#include "runtime/check.h"

namespace tessera {

std::string layer_weight(int64_t layer, const char* suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

WeightSpec embedding_weight(const ModelConfig& config) {
  return {"model.embed_tokens.weight", {config.vocab_size, config.hidden_size}};
}

void add_final_weights(std::vector<WeightSpec>& specs, const ModelConfig& config) {
  specs.push_back({"model.norm.weight", {config.hidden_size}});
  if (!config.tie_word_embeddings)
    specs.push_back({"lm_head.weight", {config.vocab_size, config.hidden_size}});
}

void add_attention_weights(std::vector<WeightSpec>& specs, const ModelConfig& config,
                           int64_t layer) {
  const int64_t hidden = config.hidden_size;
  const int64_t q_rows = config.num_heads * config.head_dim;
  const int64_t kv_rows = config.num_kv_heads * config.head_dim;
  auto name = [&](const char* suffix) { return layer_weight(layer, suffix); };
  specs.push_back({name("self_attn.q_proj.weight"), {q_rows, hidden}, true});
  specs.push_back({name("self_attn.k_proj.weight"), {kv_rows, hidden}, true});
  specs.push_back({name("self_attn.v_proj.weight"), {kv_rows, hidden}});
  if (config.attention_bias) {
    specs.push_back({name("self_attn.q_proj.bias"), {q_rows}, true});
    specs.push_back({name("self_attn.k_proj.bias"), {kv_rows}, true});
    specs.push_back({name("self_attn.v_proj.bias"), {kv_rows}});
  }
  if (config.qk_norm) {
    specs.push_back({name("self_attn.q_norm.weight"), {config.head_dim}});
    specs.push_back({name("self_attn.k_norm.weight"), {config.head_dim}});
  }
  specs.push_back({name("self_attn.o_proj.weight"), {hidden, q_rows}});
}

void add_mlp_weights(std::vector<WeightSpec>& specs, const ModelConfig& config, int64_t layer) {
  const int64_t hidden = config.hidden_size, intermediate = config.intermediate_size;
  specs.push_back({layer_weight(layer, "mlp.gate_proj.weight"), {intermediate, hidden}});
  specs.push_back({layer_weight(layer, "mlp.up_proj.weight"), {intermediate, hidden}});
  specs.push_back({layer_weight(layer, "mlp.down_proj.weight"), {hidden, intermediate}});
}

Tensor fused_qkv_bias(const ModelWeights& weights, int64_t layer) {
  std::vector<Tensor> parts;
  for (const char* projection : {"q_proj", "k_proj", "v_proj"})
    parts.push_back(weights.get(layer_weight(layer, "self_attn.") + projection + ".bias"));
  return ops::cat(parts, 0);
}

StackedLinear qkv_projection(const ModelWeights& weights, int64_t layer) {
  std::vector<LinearWeight> parts;
  for (const char* projection : {"q_proj", "k_proj", "v_proj"})
    parts.push_back(
        linear_weight(weights, layer_weight(layer, "self_attn.") + projection + ".weight"));
  return stack_linear(std::move(parts));
}

StackedLinear gate_up_projection(const ModelWeights& weights, int64_t layer) {
  return stack_linear({linear_weight(weights, layer_weight(layer, "mlp.gate_proj.weight")),
                       linear_weight(weights, layer_weight(layer, "mlp.up_proj.weight"))});
}

std::array<Tensor, 3> split_qkv(const Tensor& qkv, const ModelConfig& config) {
  const int64_t q_width = config.num_heads * config.head_dim;
  const int64_t kv_width = config.num_kv_heads * config.head_dim;
  return {ops::slice(qkv, -1, 0, q_width), ops::slice(qkv, -1, q_width, q_width + kv_width),
          ops::slice(qkv, -1, q_width + kv_width, q_width + 2 * kv_width)};
}

}  // namespace tessera
