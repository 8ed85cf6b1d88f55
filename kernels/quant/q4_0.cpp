// Q4_0: blocks of 32 (18 bytes): an f16 scale d, then 16 bytes of 4-bit quants (element j in the
// low nibble of byte j, element j + 16 in its high nibble); value = d * (quant - 8).
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  const float d = read_half(block);
  const uint8_t* packed = bytes_at(block, 2);
  for (int j = 0; j < 16; ++j) {
    quants[j] = static_cast<int8_t>((packed[j] & 0x0F) - 8);
    quants[j + 16] = static_cast<int8_t>((packed[j] >> 4) - 8);
  }
  scales[0] = scales[1] = d;
  mins[0] = mins[1] = 0.0f;
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q4_0, 2, "Q4_0", unpack, nullptr}));

}  // namespace
}  // namespace tessera::quant
