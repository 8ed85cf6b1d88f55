// Q4_1: blocks of 32 (20 bytes): f16 scale d and f16 min m, then 16 bytes of 4-bit quants (element
// j in the low nibble of byte j, element j + 16 in its high nibble); value = d * quant + m.
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  const float d = read_half(block);
  const float m = read_half(block + 2);
  const uint8_t* packed = bytes_at(block, 4);
  for (int j = 0; j < 16; ++j) {
    quants[j] = static_cast<int8_t>(packed[j] & 0x0F);
    quants[j + 16] = static_cast<int8_t>(packed[j] >> 4);
  }
  scales[0] = scales[1] = d;
  // x - (-m) rounds exactly as x + m.
  mins[0] = mins[1] = -m;
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q4_1, 3, "Q4_1", unpack, nullptr}));

}  // namespace
}  // namespace tessera::quant
