// An activation row quantized for the dot products with quantized weights, as ggml quantizes its
// activations (q8_0/q8_K): blocks of 32 int8 with an f32 scale (the block's largest magnitude
// over 127), and the quants' sums per half for the formats whose values carry a min or an offset.
#pragma once

#include <cstdint>

namespace tessera::quant {

inline constexpr int kActivationBlockElements = 32;

struct ActivationBlock {
  float scale = 0;
  int16_t half_sums[2] = {};  // sums of quants[0, 16) and quants[16, 32)
  int8_t quants[kActivationBlockElements] = {};
};
static_assert(sizeof(ActivationBlock) == 40);

// Quantizes x[0, count) (count a multiple of 32) into count / 32 blocks.
void quantize_activation(const float* x, int64_t count, ActivationBlock* out);

}  // namespace tessera::quant
