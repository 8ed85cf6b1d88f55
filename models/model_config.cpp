#include "models/model_config.h"

#include <cmath>
#include <tuple>

#include "runtime/check.h"

namespace tessera {

void ModelConfig::check_limits(const std::string& source) const {
  // Far above any published model (262k vocabulary, 16k hidden, 126 layers, 10M positions); the
  // products of these sizes stay well inside int64.
  const std::tuple<int64_t, const char*, int64_t> limits[] = {
      {vocab_size, "vocab_size", int64_t{1} << 24},
      {hidden_size, "hidden_size", int64_t{1} << 18},
      {intermediate_size, "intermediate_size", int64_t{1} << 20},
      {num_layers, "num_hidden_layers", int64_t{1} << 12},
      {num_heads, "num_attention_heads", int64_t{1} << 12},
      {num_kv_heads, "num_key_value_heads", int64_t{1} << 12},
      {head_dim, "head_dim", int64_t{1} << 12},
      {max_position_embeddings, "max_position_embeddings", int64_t{1} << 28},
      {sliding_window, "sliding_window", int64_t{1} << 28},
      {num_experts, "num_experts", int64_t{1} << 12},
      {moe_intermediate_size, "moe_intermediate_size", int64_t{1} << 20},
  };
  for (const auto& [value, field, limit] : limits)
    TESSERA_REQUIRE(value <= limit,
                    "{}: config field '{}' is {}, more than Tessera accepts ({}); the file is "
                    "corrupt or describes no real model",
                    source, field, value, limit);
}

void ModelConfig::validate(const std::string& source) const {
  check_limits(source);
  auto positive = [&](int64_t value, const char* field) {
    TESSERA_REQUIRE(value > 0, "{}: config field '{}' must be positive, got {}", source, field,
                    value);
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_layers, "num_hidden_layers");
  positive(num_heads, "num_attention_heads");
  positive(num_kv_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position_embeddings, "max_position_embeddings");
  TESSERA_REQUIRE(num_heads % num_kv_heads == 0,
                  "{}: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})",
                  source, num_heads, num_kv_heads);
  TESSERA_REQUIRE(head_dim % 2 == 0, "{}: head_dim ({}) must be even for rotary embeddings", source,
                  head_dim);
  TESSERA_REQUIRE(rms_norm_eps > 0, "{}: rms_norm_eps must be positive, got {}", source,
                  rms_norm_eps);
  TESSERA_REQUIRE(rope_theta > 0, "{}: rope_theta must be positive, got {}", source, rope_theta);
  TESSERA_REQUIRE(
      rope_scaling.type.empty() || rope_scaling.type == "llama3" || rope_scaling.type == "linear",
      "{}: rope_scaling type '{}' is not supported; supported: linear, llama3", source,
      rope_scaling.type);
  TESSERA_REQUIRE(rope_scaling.factor > 0, "{}: rope_scaling factor must be positive, got {}",
                  source, rope_scaling.factor);
  TESSERA_REQUIRE(query_pre_attn_scalar >= 0,
                  "{}: query_pre_attn_scalar must be positive (or absent), got {}", source,
                  query_pre_attn_scalar);
  TESSERA_REQUIRE(attn_logit_softcapping >= 0,
                  "{}: attn_logit_softcapping must be positive (or null), got {}", source,
                  attn_logit_softcapping);
  TESSERA_REQUIRE(final_logit_softcapping >= 0,
                  "{}: final_logit_softcapping must be positive (or null), got {}", source,
                  final_logit_softcapping);
  TESSERA_REQUIRE(sliding_window >= 0, "{}: sliding_window must be positive (or null), got {}",
                  source, sliding_window);
  TESSERA_REQUIRE(rope_local_theta >= 0, "{}: the local RoPE base must be positive, got {}", source,
                  rope_local_theta);
  TESSERA_REQUIRE(layer_types.empty() || static_cast<int64_t>(layer_types.size()) == num_layers,
                  "{}: layer_types has {} entries but num_hidden_layers is {}", source,
                  layer_types.size(), num_layers);
  for (const std::string& type : layer_types) {
    TESSERA_REQUIRE(type == kSlidingAttention || type == kFullAttention,
                    "{}: layer_types entry '{}' is not supported; supported: {}, {}", source, type,
                    kSlidingAttention, kFullAttention);
    TESSERA_REQUIRE(type != kSlidingAttention || sliding_window > 0,
                    "{}: layer_types has sliding_attention layers but no sliding_window", source);
  }
  TESSERA_REQUIRE(num_experts >= 0, "{}: the number of experts must not be negative, got {}",
                  source, num_experts);
  if (num_experts > 0) {
    TESSERA_REQUIRE(!fp8.enabled(),
                    "{}: FP8 weights of a mixture of experts ({}) are not supported yet; use the "
                    "bf16 checkpoint",
                    source, architecture);
    TESSERA_REQUIRE(num_experts_per_tok >= 1 && num_experts_per_tok <= num_experts,
                    "{}: num_experts_per_tok must be between 1 and num_experts ({}), got {}",
                    source, num_experts, num_experts_per_tok);
    positive(moe_intermediate_size, "moe_intermediate_size");
    TESSERA_REQUIRE(static_cast<int64_t>(expert_layers.size()) == num_layers,
                    "{}: {} layers marked as expert or dense, but num_hidden_layers is {}", source,
                    expert_layers.size(), num_layers);
    TESSERA_REQUIRE(hidden_act == "silu",
                    "{}: experts with hidden_act '{}' are not supported (silu only)", source,
                    hidden_act);
  }
  TESSERA_REQUIRE(hidden_act == "silu" || hidden_act == "gelu" || hidden_act == "gelu_pytorch_tanh",
                  "{}: hidden_act '{}' is not supported; supported: silu, gelu, gelu_pytorch_tanh",
                  source, hidden_act);
}

double ModelConfig::attention_scale() const {
  const double scalar =
      query_pre_attn_scalar > 0 ? query_pre_attn_scalar : static_cast<double>(head_dim);
  return 1.0 / std::sqrt(scalar);
}

int64_t ModelConfig::layer_sliding_window(int64_t layer) const {
  if (layer_types.empty()) return 0;
  return layer_types.at(static_cast<size_t>(layer)) == kSlidingAttention ? sliding_window : 0;
}

bool ModelConfig::layer_has_experts(int64_t layer) const {
  return num_experts > 0 && expert_layers.at(static_cast<size_t>(layer));
}

std::string ModelConfig::str() const {
  return fmt::format(
      "{}: vocab {}, hidden {}, intermediate {}, layers {}, heads {}/{} (kv), head_dim {}, "
      "rope_theta {}{}, tied {}, bias {}, qk_norm {}{}{}, stored {}{}",
      architecture, vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads,
      head_dim, rope_theta, rope_scaling.type.empty() ? "" : " (" + rope_scaling.type + ")",
      tie_word_embeddings, attention_bias, qk_norm,
      sliding_window > 0 ? fmt::format(", sliding_window {}", sliding_window) : "",
      num_experts > 0 ? fmt::format(", {} experts of {} ({} per token)", num_experts,
                                    moe_intermediate_size, num_experts_per_tok)
                      : "",
      dtype_name(checkpoint_dtype), fp8.enabled() ? ", " + fp8.str() : "");
}

std::string Fp8Format::str() const {
  const char* weights = weight_scale == WeightScale::block     ? "per 128x128 block"
                        : weight_scale == WeightScale::channel ? "per channel"
                                                               : "per tensor";
  const char* activations = activation == Fp8ActivationScale::token   ? "per token"
                            : activation == Fp8ActivationScale::group ? "per token and 128 columns"
                                                                      : "fixed (input_scale)";
  return fmt::format("{} FP8 e4m3: weights scaled {}, activations {}", method, weights,
                     activations);
}

}  // namespace tessera
