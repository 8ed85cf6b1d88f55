// Q2_K: super-blocks of 256 (84 bytes): 16 scale bytes (low nibble: the group's scale, high: its
// min, both times the super-block's f16 d and dmin), 64 bytes of 2-bit quants, d, dmin. Group g
// of 16 takes bits 2 * j of bytes 32 * n + 16 * (g % 2) + i, with n = g / 8, j = (g % 8) / 2;
// value = d * scale * quant - dmin * min.
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  const uint8_t* scale_bytes = bytes_at(block, 0);
  const uint8_t* packed = bytes_at(block, 16);
  const float d = read_half(block + 80);
  const float dmin = read_half(block + 82);
  for (int group = 0; group < 16; ++group) {
    const int n = group / 8, shift = 2 * ((group % 8) / 2);
    const uint8_t* source = packed + 32 * n + 16 * (group % 2);
    for (int i = 0; i < 16; ++i)
      quants[16 * group + i] = static_cast<int8_t>((source[i] >> shift) & 3);
    scales[group] = d * static_cast<float>(scale_bytes[group] & 0x0F);
    mins[group] = dmin * static_cast<float>(scale_bytes[group] >> 4);
  }
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q2_k, 10, "Q2_K", unpack, nullptr}));

}  // namespace
}  // namespace tessera::quant
