// Mixture-of-experts MLPs (MixtralForCausalLM, Qwen3MoeForCausalLM): the config fields, the
// tensors by Hugging Face name, and the form fused_moe takes (the experts' projections stacked).
// The Llama family (models/llama.cpp) uses them for the layers whose MLP has experts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/hf_config_fields.h"
#include "models/model.h"

namespace tessera {

// Whether `architecture` has experts (Mixtral, Qwen3-MoE).
bool has_experts(const std::string& architecture);

// num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob and which layers have
// experts: Mixtral's num_local_experts in every layer (intermediate_size per expert, top-k
// weights always renormalized); Qwen3-MoE's num_experts (or num_local_experts, as transformers 5
// writes it), norm_topk_prob, decoder_sparse_step and mlp_only_layers (dense MLPs of
// intermediate_size). Errors name the file and the field.
void read_expert_config(const HfConfigFields& fields, ModelConfig& config);

// "30.5B parameters, 3.3B active per token (8 of 128 experts in 48 layers)": the whole
// checkpoint's parameters, and those a token uses (the other experts' left out).
std::string expert_parameters_str(const ModelWeights& weights);

// Of the experts held in each layer with experts (num_experts, or a rank's local ones), how many
// one token leaves unread on average: a token chooses num_experts_per_tok of all the experts,
// and a rank holding some of them reads its share of those (a fraction: 0.25 of an expert for
// each of 8 ranks of Mixtral's 8 experts, 2 per token).
double unchosen_experts_per_layer(const ModelConfig& config);

// Parameters of the experts held (`config` of the whole model, or of a rank: its local experts
// under expert parallelism, its share of each expert's intermediate size under tensor
// parallelism) that one token leaves unread, over every layer with experts.
int64_t unchosen_expert_parameters(const ModelConfig& config);

// What a Hugging Face name of an expert's projection says (Mixtral's
// model.layers.L.block_sparse_moe.experts.E.w1/w3/w2.weight, Qwen3-MoE's
// model.layers.L.mlp.experts.E.gate_proj/up_proj/down_proj.weight).
enum class ExpertProjection { gate, up, down };
struct ExpertWeightName {
  int64_t layer = 0;
  int64_t expert = 0;
  ExpertProjection projection = ExpertProjection::gate;
};
// nullopt for every other name.
std::optional<ExpertWeightName> parse_expert_weight(const std::string& name);

// Whether `name` is a layer's router (Mixtral's block_sparse_moe.gate, Qwen3-MoE's mlp.gate),
// which llama.cpp's quantized mixtures keep in float.
bool is_router_weight(const std::string& name);

// The router and every expert's gate, up and down projections of `layer`.
void add_expert_weights(std::vector<WeightSpec>& specs, const ModelConfig& config, int64_t layer);

// Under expert parallelism the rank's experts only (ModelConfig::first_local_expert on); the router
// scores every expert.
struct ExpertWeights {
  Tensor router;   // [E, hidden]
  Tensor gate_up;  // [local E, 2 moe_intermediate, hidden]: each expert's gate rows, then up rows
  Tensor down;     // [local E, hidden, moe_intermediate]

  // The layer's MLP over hidden [T, hidden]: router logits, then fused_moe.
  Tensor apply(const Tensor& hidden, const ModelConfig& config) const;
};

// The experts of `layer`, stacked, each projection kind in its stored format (a float dtype or a
// GGUF block format). The per-expert tensors are taken out of `weights`, so that a model's
// loading holds at most one layer's experts twice, not every expert. Gate and up projections of
// different formats are refused, naming both tensors.
ExpertWeights expert_weights(ModelWeights& weights, const ModelConfig& config, int64_t layer);

}  // namespace tessera
