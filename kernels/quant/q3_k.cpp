// Q3_K: super-blocks of 256 (110 bytes): 32 bytes of high bits, 64 bytes of 2-bit quants, 12 bytes
// of 6-bit scales, an f16 d. Group g of 16 takes bits 2 * j of bytes 32 * n + 16 * (g % 2) + i
// (n = g / 8, j = (g % 8) / 2) and subtracts 4 where bit 4 * n + j of high-bit byte
// 16 * (g % 2) + i is clear; value = d * (scale - 32) * quant.
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

// Scale s: its low 4 bits are a nibble of bytes 0-7 (low nibbles of 0-3, 4-7, then high nibbles),
// its top 2 bits the pair 2 * (s / 4) of byte 8 + s % 4.
int scale_of(const uint8_t* packed, int s) {
  const int i = s % 4, quarter = s / 4;
  const uint8_t source = packed[quarter % 2 == 0 ? i : 4 + i];
  const int low = quarter < 2 ? (source & 0x0F) : (source >> 4);
  const int high = (packed[8 + i] >> (2 * quarter)) & 3;
  return (low | (high << 4)) - 32;
}

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  const uint8_t* high_bits = bytes_at(block, 0);
  const uint8_t* packed = bytes_at(block, 32);
  const uint8_t* scale_bytes = bytes_at(block, 96);
  const float d = read_half(block + 108);
  for (int group = 0; group < 16; ++group) {
    const int n = group / 8, j = (group % 8) / 2, half = group % 2;
    const uint8_t* source = packed + 32 * n + 16 * half;
    const uint8_t* high = high_bits + 16 * half;
    const uint8_t mask = static_cast<uint8_t>(1 << (4 * n + j));
    for (int i = 0; i < 16; ++i) {
      const int low = (source[i] >> (2 * j)) & 3;
      quants[16 * group + i] = static_cast<int8_t>(low - ((high[i] & mask) ? 0 : 4));
    }
    scales[group] = d * static_cast<float>(scale_of(scale_bytes, group));
    mins[group] = 0.0f;
  }
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q3_k, 11, "Q3_K", unpack, nullptr}));

}  // namespace
}  // namespace tessera::quant
