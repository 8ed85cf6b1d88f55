#include "models/model_config.h"

#include "kernels/check.h"

namespace tessera {

void ModelConfig::validate(const std::string& source) const {
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
  TESSERA_REQUIRE(rope_scaling.type.empty() || rope_scaling.type == "llama3",
                  "{}: rope_scaling type '{}' is not supported; supported: llama3", source,
                  rope_scaling.type);
  TESSERA_REQUIRE(hidden_act == "silu" || hidden_act == "gelu" || hidden_act == "gelu_pytorch_tanh",
                  "{}: hidden_act '{}' is not supported; supported: silu, gelu, gelu_pytorch_tanh",
                  source, hidden_act);
}

std::string ModelConfig::str() const {
  return fmt::format(
      "{}: vocab {}, hidden {}, intermediate {}, layers {}, heads {}/{} (kv), head_dim {}, "
      "rope_theta {}{}, tied {}, bias {}, qk_norm {}, stored {}",
      architecture, vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads,
      head_dim, rope_theta, rope_scaling.type.empty() ? "" : " (" + rope_scaling.type + ")",
      tie_word_embeddings, attention_bias, qk_norm, dtype_name(checkpoint_dtype));
}

}  // namespace tessera
