// Q5_1: blocks of 32 (24 bytes): f16 scale d and f16 min m, 4 bytes of fifth bits (bit j for
// element j), then 16 bytes of low nibbles (element j low, j + 16 high); value = d * quant + m.
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  const float d = read_half(block);
  const float m = read_half(block + 2);
  uint32_t high_bits;
  std::memcpy(&high_bits, block + 4, sizeof(high_bits));
  const uint8_t* packed = bytes_at(block, 8);
  for (int j = 0; j < 16; ++j) {
    quants[j] = static_cast<int8_t>((packed[j] & 0x0F) | (((high_bits >> j) & 1) << 4));
    quants[j + 16] = static_cast<int8_t>((packed[j] >> 4) | (((high_bits >> (j + 16)) & 1) << 4));
  }
  scales[0] = scales[1] = d;
  mins[0] = mins[1] = -m;  // x - (-m) rounds exactly as x + m
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q5_1, 7, "Q5_1", unpack, nullptr}));

}  // namespace
}  // namespace tessera::quant
