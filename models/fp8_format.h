// FP8 checkpoints' quantization_config (config.json), read into ModelConfig::fp8: the "fp8"
// method (DeepSeek-V3 / Qwen3-FP8: weight_block_size [128, 128] and weight_scale_inv per block,
// or per-tensor weight_scale without a block size) and compressed-tensors FP8 (weights float 8-bit
// per tensor, channel or 128x128 block; activations per token, or static per tensor with
// input_scale). Any other method, or an option Tessera would not honor, is refused naming the key
// and its value.
#pragma once

#include <string>

#include "models/hf_config_fields.h"
#include "models/model_config.h"

namespace tessera {

// Reads quantization_config (absent: config.fp8 stays disabled).
void read_quantization_config(const HfConfigFields& fields, ModelConfig& config);

// Whether a linear module ("model.layers.0.mlp.down_proj") is in format.ignored: an exact name,
// a name prefix ending in '.', a last component ("lm_head"), or a "re:" regular expression.
bool fp8_ignores(const Fp8Format& format, const std::string& module);

}  // namespace tessera
