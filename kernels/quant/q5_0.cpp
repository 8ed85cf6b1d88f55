// Q5_0: blocks of 32 (22 bytes): an f16 scale d, 4 bytes holding the fifth bit of each quant
// (bit j of the little-endian word for element j), then 16 bytes of low nibbles (element j low,
// element j + 16 high, of byte j); value = d * (quant - 16).
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  const float d = read_half(block);
  uint32_t high_bits;
  std::memcpy(&high_bits, block + 2, sizeof(high_bits));
  const uint8_t* packed = bytes_at(block, 6);
  for (int j = 0; j < 16; ++j) {
    const int low = (packed[j] & 0x0F) | (((high_bits >> j) & 1) << 4);
    const int high = (packed[j] >> 4) | (((high_bits >> (j + 16)) & 1) << 4);
    quants[j] = static_cast<int8_t>(low - 16);
    quants[j + 16] = static_cast<int8_t>(high - 16);
  }
  scales[0] = scales[1] = d;
  mins[0] = mins[1] = 0.0f;
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q5_0, 6, "Q5_0", unpack, nullptr}));

}  // namespace
}  // namespace tessera::quant
