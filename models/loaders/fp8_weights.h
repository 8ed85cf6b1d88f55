// FP8 linear weights beside the others: the scales an FP8 checkpoint stores for each of its FP8
// projections, and --quantization fp8, which quantizes a float checkpoint's projections at load
// time (per output channel, activations per token, as vLLM's online FP8). Each FP8 projection
// "<module>.weight" (f8_e4m3 [N, K]) gets "<module>.weight_scale" (f32 [N], or
// [ceil(N/128), ceil(K/128)] for 128x128 blocks) and, with fixed activation scales,
// "<module>.input_scale" (f32 [1]): models/linear_weight.h reads them.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "models/loaders/expected_weights.h"
#include "models/model_config.h"
#include "models/model_weights.h"

namespace tessera::loaders {

// The quantization names --quantization takes ("fp8"), for its error.
inline constexpr const char* kQuantizationChoices = "fp8";

// "model.layers.0.mlp.down_proj.weight": a weight of a linear projection, the tensors FP8 may hold.
bool is_projection_weight(const std::string& name);

// Finds each FP8 projection's scales through `find` (by stored name), checks their shapes and
// values, converts them to f32 on `device` and adds them to `tensors`. Throws naming the tensor
// when one is missing, misshapen or not positive, when a tensor other than a projection is FP8,
// when FP8 tensors come without a quantization_config, or when the config ignores an FP8 one.
void load_fp8_scales(const ModelConfig& config,
                     const std::function<std::optional<FoundTensor>(const std::string&)>& find,
                     const std::string& where, Device device,
                     std::map<std::string, Tensor>& tensors);

// --quantization fp8 on weights loaded to the host: every float projection becomes e4m3 codes
// with a scale per output channel (activations per token), or per 128x128 block (activations
// per token and 128 columns: synthetic:NAME:fp8_block, the form of block-scaled checkpoints);
// config.fp8 becomes the "online" format. A checkpoint that is FP8 already is left as it is; one
// quantized otherwise (GGUF Q4_K, ...) is refused.
void quantize_fp8_online(ModelWeights& weights,
                         Fp8Format::WeightScale layout = Fp8Format::WeightScale::channel);

}  // namespace tessera::loaders
