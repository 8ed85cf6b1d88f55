// The Llama family's forward, written once against ops:: (eager, traced and compiled alike):
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (q/k/v bias), Qwen3ForCausalLM (q/k
// norm). It must not branch on the token count: tracing it records no guard on the token symbol.
#pragma once

#include <vector>

#include "models/model_weights.h"

namespace tessera {

class LlamaModel {
 public:
  // Takes the weights (moved in); fuses q/k/v and gate/up into single GEMMs, builds the RoPE table
  // for `max_positions`.
  LlamaModel(ModelWeights weights, int64_t max_positions);

  // input_ids [T] (i32), positions [T] (i32) -> final hidden states [T, hidden]. Attention reads
  // its metadata and KV caches from the forward context.
  Tensor forward(const Tensor& input_ids, const Tensor& positions) const;
  // hidden [N, hidden] -> logits [N, vocab].
  Tensor compute_logits(const Tensor& hidden) const;

  const ModelConfig& config() const { return config_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t max_positions() const { return max_positions_; }
  size_t weight_bytes() const { return weight_bytes_; }

 private:
  struct Layer {
    Tensor input_norm, post_attention_norm;
    Tensor qkv_proj, qkv_bias;  // [(Hq + 2 Hk) * D, hidden]; bias only with attention_bias
    Tensor q_norm, k_norm;      // [D] with qk_norm
    Tensor o_proj;              // [hidden, Hq * D]
    Tensor gate_up_proj;        // [2 * intermediate, hidden]
    Tensor down_proj;           // [hidden, intermediate]
  };
  Tensor attention_block(const Layer& layer, int64_t index, const Tensor& hidden,
                         const Tensor& positions) const;

  ModelConfig config_;
  DType dtype_;
  Device device_;
  int64_t max_positions_;
  size_t weight_bytes_ = 0;
  Tensor embed_tokens_, final_norm_, lm_head_, cos_sin_cache_;
  std::vector<Layer> layers_;
};

}  // namespace tessera
