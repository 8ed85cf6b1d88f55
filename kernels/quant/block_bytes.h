// Reading ggml blocks: little-endian fields at fixed offsets of an unaligned block.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/half.h"

namespace tessera::quant {

inline float read_half(const std::byte* at) {
  uint16_t bits;
  std::memcpy(&bits, at, sizeof(bits));
  return Half::to_float(bits);
}

inline void write_half(float value, std::byte* at) {
  const uint16_t bits = Half(value).bits;
  std::memcpy(at, &bits, sizeof(bits));
}

// The largest magnitude of values[0, count).
inline float largest_magnitude(const float* values, int count) {
  float largest = 0;
  for (int i = 0; i < count; ++i) largest = std::max(largest, std::fabs(values[i]));
  return largest;
}

// round(value / scale) clamped to [low, high]; 0 where the scale is 0.
inline int quantize_value(float value, float scale, int low, int high) {
  if (scale == 0) return 0;
  return std::clamp(static_cast<int>(std::lround(value / scale)), low, high);
}

inline const uint8_t* bytes_at(const std::byte* block, size_t offset) {
  return reinterpret_cast<const uint8_t*>(block + offset);
}

// The 6-bit scales and mins of the eight sub-blocks of a q4_k/q5_k super-block, packed in 12
// bytes: bytes 0-3 hold the low 6 bits of scales 0-3 (their top 2 bits: the high bits of scales
// 4-7), bytes 4-7 the same for the mins, bytes 8-11 the low 4 bits of scale (low nibble) and min
// (high nibble) 4-7.
// Read branch-free as three little-endian words (bytes 0-3, 4-7, 8-11).
struct KScalesAndMins {
  uint64_t scales, mins;  // byte s: sub-block s's 6-bit scale / min
};
inline KScalesAndMins k_scales_and_mins(const uint8_t* packed) {
  uint32_t words[3];
  std::memcpy(words, packed, sizeof(words));
  const uint32_t low_scales = words[0] & 0x3f3f3f3f, low_mins = words[1] & 0x3f3f3f3f;
  const uint32_t high_scales = (words[2] & 0x0f0f0f0f) | (((words[0] >> 6) & 0x03030303) << 4);
  const uint32_t high_mins = ((words[2] >> 4) & 0x0f0f0f0f) | (((words[1] >> 6) & 0x03030303) << 4);
  return {low_scales | uint64_t{high_scales} << 32, low_mins | uint64_t{high_mins} << 32};
}
inline void k_scales_and_mins(const uint8_t* packed, uint8_t* scales, uint8_t* mins) {
  const KScalesAndMins values = k_scales_and_mins(packed);
  std::memcpy(scales, &values.scales, 8);
  std::memcpy(mins, &values.mins, 8);
}

// The head of a q4_k/q5_k super-block (f16 d and dmin, then the packed 6-bit scales and mins) as
// unpack's per-16-value scales and mins: d * scale and dmin * min of each 32-value sub-block,
// twice.
inline void k_sub_block_scales(const std::byte* block, float* scales, float* mins) {
  const float d = read_half(block);
  const float dmin = read_half(block + 2);
  uint8_t sub_scales[8], sub_mins[8];
  k_scales_and_mins(bytes_at(block, 4), sub_scales, sub_mins);
  for (int sub = 0; sub < 8; ++sub) {
    scales[2 * sub] = scales[2 * sub + 1] = d * static_cast<float>(sub_scales[sub]);
    mins[2 * sub] = mins[2 * sub + 1] = dmin * static_cast<float>(sub_mins[sub]);
  }
}

}  // namespace tessera::quant
