// An activation row quantized for the dot products with quantized weights, as ggml quantizes its
// activations (q8_0 for the formats of 32, q8_K for those of 256): blocks of 32 int8 with an f32
// scale (the largest magnitude of the scale group over 127). A scale group of 256 gives the 8
// blocks of a super-block one scale, so a dot product sums them in integers before scaling once.
#pragma once

#include <cstdint>

namespace tessera::quant {

inline constexpr int kActivationBlockElements = 32;
inline constexpr int kActivationGroupElements = 16;

// One activation row: its quants side by side (aligned loads of 32), a scale per block of 32, and
// the sums of its quants per 16 values (the formats whose values carry a min or an offset take
// those off with one vector multiply-add).
struct ActivationRow {
  const int8_t* quants;
  const float* scales;
  const int16_t* group_sums;
};

// Quantizes x[0, count) into count int8 quants, count / 32 block scales and count / 16 group
// sums, one scale per `group` values (32 or 256; count a multiple of it).
void quantize_activation(const float* x, int64_t count, int64_t group, int8_t* quants,
                         float* scales, int16_t* group_sums);

}  // namespace tessera::quant
