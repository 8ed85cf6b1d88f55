// The Llama family, written once against ops:: (eager, traced and compiled alike):
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (q/k/v bias), Qwen3ForCausalLM (q/k
// norm), and with mixtures of experts (models/mixture_of_experts.h) MixtralForCausalLM (Mistral's
// attention) and Qwen3MoeForCausalLM (Qwen3's). It must not branch on the token count: tracing it
// records no guard on the token symbol. Under tensor parallelism each rank runs this code over its
// shard (models/tensor_parallel.h).

#include <cmath>

#include "compile/ops/ops.h"
#include "models/architecture_registry.h"
#include "models/decoder_weights.h"
#include "models/hf_config_fields.h"
#include "models/mixture_of_experts.h"
#include "models/rope.h"
#include "models/tensor_parallel.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// Every tensor of `config` in load order: embeddings, then each layer, the final norm, lm_head
// (absent when tie_word_embeddings). Biases with attention_bias, q_norm/k_norm with qk_norm.
std::vector<WeightSpec> llama_weights(const ModelConfig& config) {
  std::vector<WeightSpec> specs{embedding_weight(config)};
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    specs.push_back({layer_weight(layer, "input_layernorm.weight"), {config.hidden_size}});
    add_attention_weights(specs, config, layer);
    specs.push_back({layer_weight(layer, "post_attention_layernorm.weight"), {config.hidden_size}});
    if (config.layer_has_experts(layer)) {
      add_expert_weights(specs, config, layer);
    } else {
      add_mlp_weights(specs, config, layer);
    }
  }
  add_final_weights(specs, config);
  return specs;
}

class LlamaModel final : public CausalLM {
 public:
  // Takes the weights (moved in); fuses q/k/v and gate/up into single GEMMs, builds the RoPE table
  // for `max_positions`.
  LlamaModel(ModelWeights weights, int64_t max_positions);
  Tensor forward(const Tensor& input_ids, const Tensor& positions) const override;
  Tensor compute_logits(const Tensor& hidden) const override;
  bool logits_end_in_gemm() const override { return true; }

 private:
  struct Layer {
    Tensor input_norm, post_attention_norm;
    StackedLinear qkv_proj;      // [(Hq + 2 Hk) * D, hidden]
    Tensor qkv_bias;             // only with attention_bias
    Tensor q_norm, k_norm;       // [D] with qk_norm
    LinearWeight o_proj;         // [hidden, Hq * D]
    StackedLinear gate_up_proj;  // [2 * intermediate, hidden]
    LinearWeight down_proj;      // [hidden, intermediate]
    bool has_experts = false;    // the MLP is `experts` instead of gate_up_proj and down_proj
    ExpertWeights experts;
  };
  Tensor attention_block(const Layer& layer, int64_t index, const Tensor& hidden,
                         const Tensor& positions) const;

  Tensor embed_tokens_, final_norm_, lm_head_, cos_sin_cache_;
  std::vector<Layer> layers_;
};

LlamaModel::LlamaModel(ModelWeights weights, int64_t max_positions)
    : CausalLM(weights, llama_weights(weights.config), max_positions) {
  const ModelConfig& c = config_;
  embed_tokens_ = weights.get("model.embed_tokens.weight");
  final_norm_ = weights.get("model.norm.weight");
  lm_head_ = c.tie_word_embeddings ? embed_tokens_ : weights.get("lm_head.weight");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto get = [&](const char* suffix) { return weights.get(layer_weight(i, suffix)); };
    Layer layer;
    layer.input_norm = get("input_layernorm.weight");
    layer.post_attention_norm = get("post_attention_layernorm.weight");
    layer.qkv_proj = qkv_projection(weights, i);
    if (c.attention_bias) layer.qkv_bias = fused_qkv_bias(weights, i);
    if (c.qk_norm) {
      layer.q_norm = get("self_attn.q_norm.weight");
      layer.k_norm = get("self_attn.k_norm.weight");
    }
    layer.o_proj = linear_weight(weights, layer_weight(i, "self_attn.o_proj.weight"));
    layer.has_experts = c.layer_has_experts(i);
    if (layer.has_experts) {
      layer.experts = expert_weights(weights, c, i);
    } else {
      layer.gate_up_proj = gate_up_projection(weights, i);
      layer.down_proj = linear_weight(weights, layer_weight(i, "mlp.down_proj.weight"));
    }
    layers_.push_back(std::move(layer));
  }
  cos_sin_cache_ = make_cos_sin_cache(c, max_positions, device());
  // What stays resident: the fused copies replace their parts, which die with `weights`.
  count_weight_bytes({&final_norm_, &cos_sin_cache_});
  count_weight_bytes({&embed_tokens_},
                     c.tie_word_embeddings ? WeightRole::read_whole : WeightRole::gathered_table);
  if (!c.tie_word_embeddings) count_weight_bytes({&lm_head_});
  for (const Layer& layer : layers_) {
    count_weight_bytes({&layer.input_norm, &layer.post_attention_norm, &layer.qkv_bias,
                        &layer.q_norm, &layer.k_norm});
    for (const auto* linear : {&layer.o_proj, &layer.down_proj})
      count_weight_bytes(linear->tensors());
    count_weight_bytes(layer.qkv_proj.tensors());
    count_weight_bytes(layer.gate_up_proj.tensors());
    count_weight_bytes({&layer.experts.router});
    count_weight_bytes({&layer.experts.gate_up, &layer.experts.down}, WeightRole::experts);
  }
}

Tensor LlamaModel::attention_block(const Layer& layer, int64_t index, const Tensor& hidden,
                                   const Tensor& positions) const {
  const ModelConfig& c = config_;
  const int64_t head = c.head_dim, q_width = c.num_heads * head, kv_width = c.num_kv_heads * head;
  Tensor qkv = layer.qkv_proj.apply(hidden, layer.qkv_bias);
  auto [query, key, value] = split_qkv(qkv, c);
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
                     c.attention_scale(), c.layer_sliding_window(index));
  return reduce_over_ranks(layer.o_proj.apply(attended), parallel_);
}

Tensor LlamaModel::forward(const Tensor& input_ids, const Tensor& positions) const {
  const ModelConfig& c = config_;
  Tensor hidden = parallel_embedding(embed_tokens_, input_ids, parallel_);
  if (hidden.dtype() != dtype()) hidden = ops::cast(hidden, dtype());  // a quantized table: f32
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
    if (layer.has_experts) {
      hidden = reduce_over_ranks(layer.experts.apply(hidden, c), parallel_);
      continue;
    }
    Tensor gate_up = layer.gate_up_proj.apply(hidden);
    Tensor activated = c.hidden_act == "silu"
                           ? ops::silu_and_mul(gate_up)
                           : ops::gelu_and_mul(gate_up, c.hidden_act == "gelu" ? "none" : "tanh");
    hidden = reduce_over_ranks(layer.down_proj.apply(activated), parallel_);
  }
  return ops::fused_add_rms_norm(hidden, residual, final_norm_, c.rms_norm_eps).first;
}

Tensor LlamaModel::compute_logits(const Tensor& hidden) const {
  return gather_vocab(ops::linear(hidden, lm_head_), parallel_, config_.vocab_size);
}

// config.json features the Llama-family code does not implement are refused rather than computed
// as something else; Qwen2's q/k/v biases and Qwen3's q/k norms follow from the architecture.
void read_llama_config(const HfConfigFields& fields, ModelConfig& config) {
  TESSERA_REQUIRE(!fields.boolean("mlp_bias", false),
                  "{}: mlp_bias true is not supported (gate/up/down projections without bias only)",
                  fields.file());
  config.attention_bias = config.architecture == "Qwen2ForCausalLM";
  config.qk_norm =
      config.architecture == "Qwen3ForCausalLM" || config.architecture == "Qwen3MoeForCausalLM";
  if (!config.attention_bias) {
    TESSERA_REQUIRE(!fields.boolean("attention_bias", false),
                    "{}: attention_bias true ({} puts a bias on o_proj too) is not supported",
                    fields.file(), config.architecture);
  }
  TESSERA_REQUIRE(!fields.boolean("use_sliding_window", false),
                  "{}: use_sliding_window true is not supported (full attention only)",
                  fields.file());
  if (has_experts(config.architecture)) read_expert_config(fields, config);
  // Mistral and Mixtral: a sliding_window (null: none) applies to every layer, as in
  // transformers.
  const bool mistral_attention =
      config.architecture == "MistralForCausalLM" || config.architecture == "MixtralForCausalLM";
  if (mistral_attention && fields.has("sliding_window")) {
    config.sliding_window = fields.integer("sliding_window");
    TESSERA_REQUIRE(config.sliding_window > 0, "{}: sliding_window must be positive, got {}",
                    fields.file(), config.sliding_window);
    config.layer_types.assign(static_cast<size_t>(config.num_layers), kSlidingAttention);
  }
}

Architecture llama_architecture(const char* name, const char* model_type) {
  return Architecture{name,
                      model_type,
                      read_llama_config,
                      llama_weights,
                      [](ModelWeights weights, int64_t max_positions) -> std::unique_ptr<CausalLM> {
                        return std::make_unique<LlamaModel>(std::move(weights), max_positions);
                      },
                      /*tensor_parallel=*/true};
}

TESSERA_REGISTER_ARCHITECTURE(llama_architecture("LlamaForCausalLM", "llama"));
TESSERA_REGISTER_ARCHITECTURE(llama_architecture("MistralForCausalLM", "mistral"));
TESSERA_REGISTER_ARCHITECTURE(llama_architecture("Qwen2ForCausalLM", "qwen2"));
TESSERA_REGISTER_ARCHITECTURE(llama_architecture("Qwen3ForCausalLM", "qwen3"));
TESSERA_REGISTER_ARCHITECTURE(llama_architecture("MixtralForCausalLM", "mixtral"));
TESSERA_REGISTER_ARCHITECTURE(llama_architecture("Qwen3MoeForCausalLM", "qwen3_moe"));

}  // namespace
}  // namespace tessera
