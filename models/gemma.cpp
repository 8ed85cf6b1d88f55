// Gemma 2 and Gemma 3 (text only), written against ops:: like the Llama family, with transformers'
// semantics: embeddings scaled by sqrt(hidden) rounded to the run dtype; RMSNorm computed in f32
// times (1 + weight), rounded once; norms before and after attention and the MLP; a GELU-tanh
// gated MLP; queries scaled by query_pre_attn_scalar^-0.5; sliding-window attention on the
// layers layer_types marks; tanh softcapping of attention scores (Gemma 2) and of the logits;
// Gemma 3's per-head q/k norms and its two RoPE bases (local layers unscaled). Tied embeddings.
#include <cmath>

#include "compile/ops/ops.h"
#include "models/architecture_registry.h"
#include "models/decoder_weights.h"
#include "models/hf_config_fields.h"
#include "models/rope.h"
#include "models/tensor_parallel.h"
#include "runtime/check.h"

namespace tessera {
namespace {

constexpr char kGemma2[] = "Gemma2ForCausalLM";
constexpr char kGemma3[] = "Gemma3ForCausalLM";

std::vector<WeightSpec> gemma_weights(const ModelConfig& config) {
  const Shape hidden{config.hidden_size};
  std::vector<WeightSpec> specs{embedding_weight(config)};
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    specs.push_back({layer_weight(layer, "input_layernorm.weight"), hidden});
    add_attention_weights(specs, config, layer);
    for (const char* norm : {"post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
                             "post_feedforward_layernorm.weight"})
      specs.push_back({layer_weight(layer, norm), hidden});
    add_mlp_weights(specs, config, layer);
  }
  add_final_weights(specs, config);
  return specs;
}

class GemmaModel final : public CausalLM {
 public:
  GemmaModel(ModelWeights weights, int64_t max_positions);
  Tensor forward(const Tensor& input_ids, const Tensor& positions) const override;
  Tensor compute_logits(const Tensor& hidden) const override;
  bool logits_end_in_gemm() const override { return config_.final_logit_softcapping <= 0; }

 private:
  struct Layer {
    // Norm scales are (1 + weight) in f32, as transformers computes them.
    Tensor input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;
    Tensor q_norm, k_norm;       // [D], Gemma 3
    StackedLinear qkv_proj;      // [(Hq + 2 Hk) * D, hidden]
    LinearWeight o_proj;         // [hidden, Hq * D]
    StackedLinear gate_up_proj;  // [2 * intermediate, hidden]
    LinearWeight down_proj;      // [hidden, intermediate]
  };
  // Gemma's RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w) in f32, rounded once to x's dtype
  // (Llama rounds before the weight).
  Tensor norm(const Tensor& x, const Tensor& scale) const;
  // {norm(x + residual), x + residual}, the sum rounded to the dtype as transformers adds.
  std::pair<Tensor, Tensor> add_norm(const Tensor& x, const Tensor& residual,
                                     const Tensor& scale) const;
  Tensor attention_block(const Layer& layer, int64_t index, const Tensor& hidden,
                         const Tensor& positions) const;

  double embed_scale_ = 1;  // sqrt(hidden) rounded to the run dtype
  Tensor embed_tokens_, final_norm_, lm_head_;
  Tensor global_rope_, local_rope_;  // cos/sin tables of full and sliding layers
  std::vector<Layer> layers_;
};

GemmaModel::GemmaModel(ModelWeights weights, int64_t max_positions)
    : CausalLM(weights, gemma_weights(weights.config), max_positions) {
  const ModelConfig& c = config_;
  auto norm_scale = [](const Tensor& weight) {
    return ops::add_scalar(ops::cast(weight, DType::f32), 1.0);
  };
  embed_tokens_ = weights.get("model.embed_tokens.weight");
  const std::vector<float> scale{static_cast<float>(std::sqrt(c.hidden_size))};
  embed_scale_ = Tensor::from_floats(scale, {1}, dtype()).to_floats()[0];
  final_norm_ = norm_scale(weights.get("model.norm.weight"));
  lm_head_ = c.tie_word_embeddings ? embed_tokens_ : weights.get("lm_head.weight");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto get = [&](const char* suffix) { return weights.get(layer_weight(i, suffix)); };
    Layer layer;
    layer.input_norm = norm_scale(get("input_layernorm.weight"));
    layer.post_attention_norm = norm_scale(get("post_attention_layernorm.weight"));
    layer.pre_feedforward_norm = norm_scale(get("pre_feedforward_layernorm.weight"));
    layer.post_feedforward_norm = norm_scale(get("post_feedforward_layernorm.weight"));
    if (c.qk_norm) {
      layer.q_norm = norm_scale(get("self_attn.q_norm.weight"));
      layer.k_norm = norm_scale(get("self_attn.k_norm.weight"));
    }
    layer.qkv_proj = qkv_projection(weights, i);
    layer.o_proj = linear_weight(weights, layer_weight(i, "self_attn.o_proj.weight"));
    layer.gate_up_proj = gate_up_projection(weights, i);
    layer.down_proj = linear_weight(weights, layer_weight(i, "mlp.down_proj.weight"));
    layers_.push_back(std::move(layer));
  }
  global_rope_ = make_cos_sin_cache(c, max_positions, device());
  local_rope_ = global_rope_;
  if (c.rope_local_theta > 0) {  // Gemma 3: local layers rotate with their own, unscaled base
    ModelConfig local = c;
    local.rope_theta = c.rope_local_theta;
    local.rope_scaling = RopeScaling{};
    local_rope_ = make_cos_sin_cache(local, max_positions, device());
    count_weight_bytes({&local_rope_});
  }
  count_weight_bytes({&final_norm_, &global_rope_});
  count_weight_bytes({&embed_tokens_},
                     c.tie_word_embeddings ? WeightRole::read_whole : WeightRole::gathered_table);
  if (!c.tie_word_embeddings) count_weight_bytes({&lm_head_});
  for (const Layer& layer : layers_) {
    count_weight_bytes({&layer.input_norm, &layer.post_attention_norm, &layer.pre_feedforward_norm,
                        &layer.post_feedforward_norm, &layer.q_norm, &layer.k_norm});
    for (const std::vector<const Tensor*>& held :
         {layer.qkv_proj.tensors(), layer.o_proj.tensors(), layer.gate_up_proj.tensors(),
          layer.down_proj.tensors()})
      count_weight_bytes(held);
  }
}

Tensor GemmaModel::norm(const Tensor& x, const Tensor& scale) const {
  const double eps = config_.rms_norm_eps;
  // In f32 the rms_norm op computes exactly this (one rounding after the weight). In f16/bf16
  // transformers multiplies by the weight before rounding, which the op does not: those dtypes
  // take the primitives below whatever compilation.custom_ops says (compiled mode fuses them).
  if (x.dtype() == DType::f32) return ops::rms_norm(x, scale, eps);
  Tensor x_f32 = ops::cast(x, DType::f32);
  Tensor variance = ops::mean(ops::mul(x_f32, x_f32), /*keepdim=*/true);
  Tensor normalized = ops::mul(x_f32, ops::rsqrt(ops::add_scalar(variance, eps)));
  return ops::cast(ops::mul(normalized, scale), x.dtype());
}

std::pair<Tensor, Tensor> GemmaModel::add_norm(const Tensor& x, const Tensor& residual,
                                               const Tensor& scale) const {
  if (x.dtype() == DType::f32)
    return ops::fused_add_rms_norm(x, residual, scale, config_.rms_norm_eps);
  Tensor sum = ops::add(x, residual);
  return {norm(sum, scale), sum};
}

Tensor GemmaModel::attention_block(const Layer& layer, int64_t index, const Tensor& hidden,
                                   const Tensor& positions) const {
  const ModelConfig& c = config_;
  const int64_t head = c.head_dim, q_width = c.num_heads * head, kv_width = c.num_kv_heads * head;
  Tensor qkv = layer.qkv_proj.apply(hidden);
  auto [query, key, value] = split_qkv(qkv, c);
  if (c.qk_norm) {  // Gemma 3: each head's vector normalized before RoPE
    query = ops::reshape(norm(ops::reshape(query, {-1, c.num_heads, head}), layer.q_norm),
                         {-1, q_width});
    key = ops::reshape(norm(ops::reshape(key, {-1, c.num_kv_heads, head}), layer.k_norm),
                       {-1, kv_width});
  }
  const int64_t window = c.layer_sliding_window(index);
  const Tensor& rope = window > 0 ? local_rope_ : global_rope_;
  auto [rotated_query, rotated_key] =
      ops::rotary_embedding(positions, query, key, rope, head, /*is_neox=*/true);
  Tensor attended =
      ops::attention(rotated_query, rotated_key, value, index, c.num_heads, c.num_kv_heads, head,
                     c.attention_scale(), window, c.attn_logit_softcapping);
  return reduce_over_ranks(layer.o_proj.apply(attended), parallel_);
}

Tensor GemmaModel::forward(const Tensor& input_ids, const Tensor& positions) const {
  const ModelConfig& c = config_;
  Tensor hidden =
      ops::mul_scalar(parallel_embedding(embed_tokens_, input_ids, parallel_), embed_scale_);
  Tensor residual = hidden;
  hidden = norm(hidden, layers_.front().input_norm);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    if (i > 0) std::tie(hidden, residual) = add_norm(hidden, residual, layer.input_norm);
    hidden = attention_block(layer, static_cast<int64_t>(i), hidden, positions);
    hidden = norm(hidden, layer.post_attention_norm);
    std::tie(hidden, residual) = add_norm(hidden, residual, layer.pre_feedforward_norm);
    Tensor gate_up = layer.gate_up_proj.apply(hidden);
    Tensor activated = ops::gelu_and_mul(gate_up, c.hidden_act == "gelu" ? "none" : "tanh");
    hidden = norm(reduce_over_ranks(layer.down_proj.apply(activated), parallel_),
                  layer.post_feedforward_norm);
  }
  return add_norm(hidden, residual, final_norm_).first;
}

Tensor GemmaModel::compute_logits(const Tensor& hidden) const {
  Tensor logits = gather_vocab(ops::linear(hidden, lm_head_), parallel_, config_.vocab_size);
  const double cap = config_.final_logit_softcapping;
  return cap > 0 ? ops::softcap(logits, cap) : logits;
}

// A softcap field: transformers' class default when absent, none when null.
double read_softcap(const HfConfigFields& fields, const char* key, double fallback) {
  if (!fields.contains(key)) return fallback;
  const double cap = fields.number(key, 0);
  TESSERA_REQUIRE(!fields.has(key) || cap > 0, "{}: '{}' must be positive or null, got {}",
                  fields.file(), key, cap);
  return cap;
}

// The layer types when config.json has no layer_types: a sliding layer unless (i + 1) is a
// multiple of `pattern` (Gemma 2: every other layer; Gemma 3: sliding_window_pattern).
std::vector<std::string> patterned_layer_types(int64_t num_layers, int64_t pattern) {
  std::vector<std::string> types;
  for (int64_t i = 0; i < num_layers; ++i)
    types.push_back((i + 1) % pattern != 0 ? kSlidingAttention : kFullAttention);
  return types;
}

// Gemma 3's RoPE: transformers >= 5 writes rope_parameters per layer type; older versions
// rope_theta + rope_scaling for full layers and rope_local_base_freq for sliding ones.
void read_gemma3_rope(const HfConfigFields& fields, ModelConfig& config) {
  if (fields.has("rope_parameters") && fields.object("rope_parameters").has(kFullAttention)) {
    const HfConfigFields rope = fields.object("rope_parameters");
    const HfConfigFields full = rope.object(kFullAttention);
    config.rope_theta = full.number("rope_theta", 1000000.0);
    config.rope_scaling = read_rope_scaling(full);
    const HfConfigFields local = rope.object(kSlidingAttention);
    config.rope_local_theta = local.number("rope_theta", 10000.0);
    TESSERA_REQUIRE(read_rope_scaling(local).type.empty(),
                    "{}: rope_parameters.sliding_attention rope_type '{}' is not supported; "
                    "supported: default",
                    fields.file(), read_rope_scaling(local).type);
    return;
  }
  // Full layers keep what the common fields gave (rope_theta, rope_scaling or a flat
  // rope_parameters), with transformers' Gemma 3 default base when none is given.
  if (!fields.has("rope_theta") && !fields.has("rope_parameters")) config.rope_theta = 1000000.0;
  config.rope_local_theta = fields.number("rope_local_base_freq", 10000.0);
}

void read_gemma_config(const HfConfigFields& fields, ModelConfig& config) {
  const bool gemma3 = config.architecture == kGemma3;
  TESSERA_REQUIRE(!fields.boolean("attention_bias", false),
                  "{}: attention_bias true is not supported (projections without bias only)",
                  fields.file());
  TESSERA_REQUIRE(!fields.boolean("use_bidirectional_attention", false),
                  "{}: use_bidirectional_attention true is not supported (causal attention only)",
                  fields.file());
  config.hidden_act = fields.text("hidden_activation", "gelu_pytorch_tanh");
  TESSERA_REQUIRE(config.hidden_act == "gelu_pytorch_tanh" || config.hidden_act == "gelu",
                  "{}: hidden_activation '{}' is not supported; supported: gelu_pytorch_tanh, gelu",
                  fields.file(), config.hidden_act);
  config.tie_word_embeddings = fields.boolean("tie_word_embeddings", true);
  config.query_pre_attn_scalar = fields.number("query_pre_attn_scalar", 256);
  TESSERA_REQUIRE(config.query_pre_attn_scalar > 0,
                  "{}: query_pre_attn_scalar must be positive, got {}", fields.file(),
                  config.query_pre_attn_scalar);
  config.sliding_window = fields.integer("sliding_window", 4096);
  TESSERA_REQUIRE(config.sliding_window > 0, "{}: sliding_window must be positive, got {}",
                  fields.file(), config.sliding_window);
  config.final_logit_softcapping =
      read_softcap(fields, "final_logit_softcapping", gemma3 ? 0.0 : 30.0);
  if (gemma3) {
    // transformers' Gemma 3 attention does not apply it; refuse rather than differ.
    TESSERA_REQUIRE(!fields.has("attn_logit_softcapping"),
                    "{}: attn_logit_softcapping is not supported for {} (transformers ignores it); "
                    "set it to null",
                    fields.file(), config.architecture);
    config.qk_norm = true;
    read_gemma3_rope(fields, config);
  } else {
    config.attn_logit_softcapping = read_softcap(fields, "attn_logit_softcapping", 50.0);
  }
  config.layer_types = fields.texts("layer_types");
  if (config.layer_types.empty()) {
    const int64_t pattern = gemma3 ? fields.integer("sliding_window_pattern",
                                                    fields.integer("_sliding_window_pattern", 6))
                                   : 2;
    TESSERA_REQUIRE(pattern > 0, "{}: sliding_window_pattern must be positive, got {}",
                    fields.file(), pattern);
    config.layer_types = patterned_layer_types(config.num_layers, pattern);
  }
}

Architecture gemma_architecture(const char* name, const char* model_type) {
  return Architecture{name,
                      model_type,
                      read_gemma_config,
                      gemma_weights,
                      [](ModelWeights weights, int64_t max_positions) -> std::unique_ptr<CausalLM> {
                        return std::make_unique<GemmaModel>(std::move(weights), max_positions);
                      },
                      /*tensor_parallel=*/true};
}

TESSERA_REGISTER_ARCHITECTURE(gemma_architecture(kGemma2, "gemma2"));
TESSERA_REGISTER_ARCHITECTURE(gemma_architecture(kGemma3, "gemma3_text"));

}  // namespace
}  // namespace tessera
