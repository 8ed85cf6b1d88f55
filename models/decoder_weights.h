// The tensors decoder-only families share, by Hugging Face name and shape, and their fused forms:
// family files (models/llama.cpp, models/gemma.cpp) build their weight lists and layers from
// these, adding what is their own (Gemma's extra norms).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "models/linear_weight.h"
#include "models/model.h"

namespace tessera {

// "model.layers.{layer}.{suffix}".
std::string layer_weight(int64_t layer, const char* suffix);

// model.embed_tokens.weight [vocab, hidden].
WeightSpec embedding_weight(const ModelConfig& config);
// model.norm.weight and, unless tie_word_embeddings, lm_head.weight.
void add_final_weights(std::vector<WeightSpec>& specs, const ModelConfig& config);
// q/k/v projections of `layer` (with biases when attention_bias), q/k norms (qk_norm), o_proj.
void add_attention_weights(std::vector<WeightSpec>& specs, const ModelConfig& config,
                           int64_t layer);
// The gated MLP of `layer`: gate_proj, up_proj, down_proj.
void add_mlp_weights(std::vector<WeightSpec>& specs, const ModelConfig& config, int64_t layer);

// q, k and v of `layer`; gate_proj and up_proj of `layer`.
StackedLinear qkv_projection(const ModelWeights& weights, int64_t layer);
StackedLinear gate_up_projection(const ModelWeights& weights, int64_t layer);

// q, k and v biases of `layer` (attention_bias) stacked: [(Hq + 2 Hk) * D].
Tensor fused_qkv_bias(const ModelWeights& weights, int64_t layer);
// {query, key, value} column slices of the fused projection's output [T, (Hq + 2 Hk) * D].
std::array<Tensor, 3> split_qkv(const Tensor& qkv, const ModelConfig& config);

}  // namespace tessera
