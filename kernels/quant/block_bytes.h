// Reading ggml blocks: little-endian fields at fixed offsets of an unaligned block.
#pragma once

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

inline const uint8_t* bytes_at(const std::byte* block, size_t offset) {
  return reinterpret_cast<const uint8_t*>(block + offset);
}

// The 6-bit scale and min of sub-block j (0..7) of a q4_k/q5_k super-block's 12 packed bytes:
// bytes 0-3 hold the low 6 bits of scales 0-3 (their top 2 bits: high bits of scales 4-7),
// bytes 4-7 the same for the mins, bytes 8-11 the low 4 bits of scale and min 4-7.
inline void k_scale_min(int j, const uint8_t* packed, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

}  // namespace tessera::quant
