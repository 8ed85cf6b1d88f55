#include "models/llama.h"

#include <cmath>

#include "compile/ops/ops.h"
#include "kernels/check.h"
#include "models/rope.h"

namespace tessera {

namespace {

Tensor join_rows(std::vector<Tensor> parts) {
  return ops::cat(parts, 0);
}

}  // namespace

LlamaModel::LlamaModel(ModelWeights weights, int64_t max_positions)
    : config_(weights.config), max_positions_(max_positions) {
  const ModelConfig& c = config_;
  c.validate(weights.source);
  const int64_t hidden = c.hidden_size, head = c.head_dim, inter = c.intermediate_size;
  const int64_t q_rows = c.num_heads * head, kv_rows = c.num_kv_heads * head;
  embed_tokens_ = weights.get("model.embed_tokens.weight", {c.vocab_size, hidden});
  dtype_ = embed_tokens_.dtype();
  device_ = embed_tokens_.device();
  final_norm_ = weights.get("model.norm.weight", {hidden});
  lm_head_ =
      c.tie_word_embeddings ? embed_tokens_ : weights.get("lm_head.weight", {c.vocab_size, hidden});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto name = [&](const char* suffix) { return fmt::format("model.layers.{}.{}", i, suffix); };
    Layer layer;
    layer.input_norm = weights.get(name("input_layernorm.weight"), {hidden});
    layer.post_attention_norm = weights.get(name("post_attention_layernorm.weight"), {hidden});
    layer.qkv_proj = join_rows({weights.get(name("self_attn.q_proj.weight"), {q_rows, hidden}),
                                weights.get(name("self_attn.k_proj.weight"), {kv_rows, hidden}),
                                weights.get(name("self_attn.v_proj.weight"), {kv_rows, hidden})});
    if (c.attention_bias) {
      layer.qkv_bias = join_rows({weights.get(name("self_attn.q_proj.bias"), {q_rows}),
                                  weights.get(name("self_attn.k_proj.bias"), {kv_rows}),
                                  weights.get(name("self_attn.v_proj.bias"), {kv_rows})});
    }
    if (c.qk_norm) {
      layer.q_norm = weights.get(name("self_attn.q_norm.weight"), {head});
      layer.k_norm = weights.get(name("self_attn.k_norm.weight"), {head});
    }
    layer.o_proj = weights.get(name("self_attn.o_proj.weight"), {hidden, q_rows});
    layer.gate_up_proj = join_rows({weights.get(name("mlp.gate_proj.weight"), {inter, hidden}),
                                    weights.get(name("mlp.up_proj.weight"), {inter, hidden})});
    layer.down_proj = weights.get(name("mlp.down_proj.weight"), {hidden, inter});
    layers_.push_back(std::move(layer));
  }
  cos_sin_cache_ = make_cos_sin_cache(c, max_positions, device_);
  // What stays resident: the fused copies replace their parts, which die with `weights`.
  weight_bytes_ = embed_tokens_.nbytes() + final_norm_.nbytes() + cos_sin_cache_.nbytes() +
                  (c.tie_word_embeddings ? 0 : lm_head_.nbytes());
  for (const Layer& layer : layers_) {
    for (const Tensor* t :
         {&layer.input_norm, &layer.post_attention_norm, &layer.qkv_proj, &layer.qkv_bias,
          &layer.q_norm, &layer.k_norm, &layer.o_proj, &layer.gate_up_proj, &layer.down_proj})
      if (t->defined()) weight_bytes_ += t->nbytes();
  }
}

Tensor LlamaModel::attention_block(const Layer& layer, int64_t index, const Tensor& hidden,
                                   const Tensor& positions) const {
  const ModelConfig& c = config_;
  const int64_t head = c.head_dim, q_width = c.num_heads * head, kv_width = c.num_kv_heads * head;
  Tensor qkv = layer.qkv_bias.defined() ? ops::linear(hidden, layer.qkv_proj, layer.qkv_bias)
                                        : ops::linear(hidden, layer.qkv_proj);
  Tensor query = ops::slice(qkv, -1, 0, q_width);
  Tensor key = ops::slice(qkv, -1, q_width, q_width + kv_width);
  Tensor value = ops::slice(qkv, -1, q_width + kv_width, q_width + 2 * kv_width);
  if (c.qk_norm) {  // Qwen3: RMS norm over each head's vector before RoPE
    query = ops::reshape(
        ops::rms_norm(ops::reshape(query, {-1, c.num_heads, head}), layer.q_norm, c.rms_norm_eps),
        {-1, q_width});
    key = ops::reshape(
        ops::rms_norm(ops::reshape(key, {-1, c.num_kv_heads, head}), layer.k_norm, c.rms_norm_eps),
        {-1, kv_width});
  }
  auto [rotated_query, rotated_key] =
      ops::rotary_embedding(positions, query, key, cos_sin_cache_, head, /*is_neox=*/true);
  Tensor attended =
      ops::attention(rotated_query, rotated_key, value, index, c.num_heads, c.num_kv_heads, head,
                     1.0 / std::sqrt(static_cast<double>(head)));
  return ops::linear(attended, layer.o_proj);
}

Tensor LlamaModel::forward(const Tensor& input_ids, const Tensor& positions) const {
  const ModelConfig& c = config_;
  Tensor hidden = ops::embedding(embed_tokens_, input_ids);
  Tensor residual;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    if (i == 0) {
      residual = hidden;
      hidden = ops::rms_norm(hidden, layer.input_norm, c.rms_norm_eps);
    } else {
      std::tie(hidden, residual) =
          ops::fused_add_rms_norm(hidden, residual, layer.input_norm, c.rms_norm_eps);
    }
    hidden = attention_block(layer, static_cast<int64_t>(i), hidden, positions);
    std::tie(hidden, residual) =
        ops::fused_add_rms_norm(hidden, residual, layer.post_attention_norm, c.rms_norm_eps);
    Tensor gate_up = ops::linear(hidden, layer.gate_up_proj);
    Tensor activated = c.hidden_act == "silu"
                           ? ops::silu_and_mul(gate_up)
                           : ops::gelu_and_mul(gate_up, c.hidden_act == "gelu" ? "none" : "tanh");
    hidden = ops::linear(activated, layer.down_proj);
  }
  return ops::fused_add_rms_norm(hidden, residual, final_norm_, c.rms_norm_eps).first;
}

Tensor LlamaModel::compute_logits(const Tensor& hidden) const {
  return ops::linear(hidden, lm_head_);
}

}  // namespace tessera
