// A model's architecture hyper-parameters, in Hugging Face's terms (config.json). Every loader
// (HF folder, llama2.c .bin, GGUF, synthetic) produces one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/quant/fp8_scaling.h"
#include "runtime/dtype.h"

namespace tessera {

struct RopeScaling {
  std::string type;  // "" (none), "linear" (frequencies / factor) or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// How a checkpoint's FP8 linear weights are scaled (config.json's quantization_config, read by
// models/fp8_format.cpp, or --quantization fp8); an empty method: no FP8 weights. Scales per
// tensor are loaded as per-channel scales of equal values, so kernels see channel or block.
struct Fp8Format {
  enum class WeightScale { tensor, channel, block };
  std::string method;  // "fp8", "compressed-tensors" or "online" (quantized at load time)
  WeightScale weight_scale = WeightScale::channel;
  Fp8ActivationScale activation = Fp8ActivationScale::token;
  // Modules kept in their float dtype (lm_head, ...): names, name prefixes, or "re:" patterns.
  std::vector<std::string> ignored;
  // compressed-tensors' kv_cache_scheme: each layer's self_attn.k_scale and v_scale, the scales
  // of an FP8 KV cache (engine.kv_cache_dtype fp8).
  bool kv_cache_scales = false;

  bool enabled() const { return !method.empty(); }
  std::string str() const;  // "fp8 (weights per 128x128 block, activations per token group)"
};

inline constexpr char kSlidingAttention[] = "sliding_attention";
inline constexpr char kFullAttention[] = "full_attention";

struct ModelConfig {
  std::string architecture = "LlamaForCausalLM";  // a name in models/architecture_registry.h
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // hidden_size / num_heads unless given
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  bool qk_norm = false;         // per-head RMS norm of q and k (Qwen3, Gemma 3)
  std::string hidden_act = "silu";
  // Attention variants (Gemma 2/3); the defaults are plain causal attention scaled by
  // head_dim^-0.5.
  double query_pre_attn_scalar = 0;      // scores scale by this^-0.5; 0: head_dim
  double attn_logit_softcapping = 0;     // scores = tanh(scores / cap) * cap; 0: none
  double final_logit_softcapping = 0;    // the same on the logits; 0: none
  int64_t sliding_window = 0;            // keys within this many positions on sliding layers
  std::vector<std::string> layer_types;  // per layer: kSlidingAttention or kFullAttention
  double rope_local_theta = 0;           // RoPE base of sliding layers (unscaled); 0: rope_theta
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  // Mixtures of experts (Mixtral, Qwen3-MoE): layers whose MLP is num_experts SwiGLU experts of
  // moe_intermediate_size, num_experts_per_tok of them per token (their routing weights
  // renormalized with norm_topk_prob). num_experts 0: a dense MLP everywhere.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  std::vector<bool> expert_layers;  // per layer with num_experts: experts (true) or the dense MLP
  // Under expert parallelism, this rank's experts: [first_local_expert, + num_local_experts);
  // num_local_experts 0: every expert.
  int64_t first_local_expert = 0;
  int64_t num_local_experts = 0;
  int64_t local_experts() const { return num_local_experts > 0 ? num_local_experts : num_experts; }
  DType checkpoint_dtype = DType::f32;  // the dtype the weights are stored in
  Fp8Format fp8;                        // FP8 linear weights, when enabled()

  // Throws naming the first inconsistent field (heads not dividing, zero sizes, ...); checks the
  // limits first.
  void validate(const std::string& source) const;
  // Throws naming the first size past what Tessera accepts (layers, heads, vocabulary, hidden
  // sizes, positions), so that loaders can refuse a corrupt count before they allocate anything
  // in proportion to it, and products of these sizes cannot overflow.
  void check_limits(const std::string& source) const;
  // query_pre_attn_scalar^-0.5, else head_dim^-0.5.
  double attention_scale() const;
  // The window of layer `layer`: sliding_window on sliding layers, else 0 (none).
  int64_t layer_sliding_window(int64_t layer) const;
  // Whether layer `layer`'s MLP is a mixture of experts.
  bool layer_has_experts(int64_t layer) const;
  std::string str() const;  // one line for logs
};

}  // namespace tessera
