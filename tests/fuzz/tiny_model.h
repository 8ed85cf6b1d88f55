// The tiny Llama configuration the model-file fuzz targets load weights against (and that the
// seed corpora's weights match, tests/fuzz/make_seeds.py): every tensor a handful of floats.
#pragma once

namespace tessera::fuzz {

inline constexpr const char* kTinyLlamaConfig = R"({
  "architectures": ["LlamaForCausalLM"],
  "vocab_size": 16,
  "hidden_size": 8,
  "intermediate_size": 16,
  "num_hidden_layers": 1,
  "num_attention_heads": 2,
  "num_key_value_heads": 1,
  "max_position_embeddings": 32,
  "rms_norm_eps": 1e-05,
  "tie_word_embeddings": true,
  "torch_dtype": "float32"
})";

}  // namespace tessera::fuzz
