// Q5_K: super-blocks of 256 (176 bytes): f16 d and dmin, 12 bytes of 6-bit scales and mins
// (block_bytes.h: k_scales_and_mins), 32 bytes of fifth bits, 128 bytes of low nibbles. Sub-block s
// of 32 takes the low (even s) or high (odd s) nibbles of bytes 32 * (s / 2) + i and adds 16 where
// bit s of fifth-bit byte i is set; value = d * scale * quant - dmin * min.
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  k_sub_block_scales(block, scales, mins);
  const uint8_t* high_bits = bytes_at(block, 16);
  const uint8_t* packed = bytes_at(block, 48);
  for (int sub = 0; sub < 8; ++sub) {
    const uint8_t* source = packed + 32 * (sub / 2);
    for (int i = 0; i < 32; ++i) {
      const int low = sub % 2 == 0 ? source[i] & 0x0F : source[i] >> 4;
      quants[32 * sub + i] = static_cast<int8_t>(low | (((high_bits[i] >> sub) & 1) << 4));
    }
  }
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q5_k, 13, "Q5_K", unpack, nullptr}));

}  // namespace
}  // namespace tessera::quant
