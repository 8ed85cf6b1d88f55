// How fp8_linear scales (compile/ops/fp8_linear.cpp): the weight is e4m3 [N, K] with f32 scales
// per output channel [N] or per block of kFp8Block x kFp8Block [ceil(N/128), ceil(K/128)]; x is
// quantized to e4m3 as the step runs, with one scale per token, per token and group of kFp8Block
// columns (the block-scaled checkpoints' 1x128), or a fixed input_scale. (No dynamic scale per
// tensor: one scale over the whole step would make each request's output depend on the others.)
//   out[m, n] = sum over column groups g of  x_scale[m, g] * weight_scale[n, g] *
//               sum over k in g of  e4m3(x[m, k] * x_inverse[m, g]) * weight[n, k]
// Every device computes a scale and its inverse with the functions below, so they quantize x
// to the same codes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/host_device.h"

namespace tessera {

// The block edge of block-scaled FP8 weights (DeepSeek-V3 and Qwen3-FP8 checkpoints, and the
// only block cuBLASLt scales by).
inline constexpr int64_t kFp8Block = 128;

enum class Fp8ActivationScale : uint8_t {
  token,  // dynamic, one scale per row of x
  group,  // dynamic, one scale per row and kFp8Block columns
  fixed,  // input_scale, from the checkpoint
};

// "token", "group", "fixed"; parse throws naming the valid choices.
const char* fp8_activation_scale_name(Fp8ActivationScale scale);
Fp8ActivationScale parse_fp8_activation_scale(std::string_view name);

// The smallest scale: below it the inverse would overflow to infinity and turn zeros into NaN
// (vLLM's floor; a group this small is zero to e4m3 anyway). A fixed input scale below it is
// refused when loaded.
inline constexpr float kFp8MinScale = 1.0f / (448.0f * 512.0f);

// The scale that maps a group whose largest magnitude is `amax` onto e4m3's +-448, and the
// factor that quantizes it; groups whose amax is below 448 * kFp8MinScale (all-zero ones too)
// take the floor.
TESSERA_HOST_DEVICE inline float fp8_dynamic_scale(float amax) {
  return amax > 448.0f * kFp8MinScale ? amax / 448.0f : kFp8MinScale;
}
TESSERA_HOST_DEVICE inline float fp8_dynamic_inverse(float amax) {
  return amax > 448.0f * kFp8MinScale ? 448.0f / amax : 1.0f / kFp8MinScale;
}

}  // namespace tessera
