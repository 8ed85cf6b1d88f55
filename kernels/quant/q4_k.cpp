// Q4_K: super-blocks of 256 (144 bytes): f16 d and dmin, 12 bytes of 6-bit scales and mins
// (block_bytes.h: k_scale_min), 128 bytes of 4-bit quants. Sub-block s of 32 takes the low
// (even s) or high (odd s) nibbles of bytes 32 * (s / 2) + i; value = d * scale * quant - dmin *
// min.
#include "kernels/quant/avx2_dot.h"
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

constexpr size_t kBlockBytes = 144;

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  const float d = read_half(block);
  const float dmin = read_half(block + 2);
  const uint8_t* packed_scales = bytes_at(block, 4);
  const uint8_t* packed = bytes_at(block, 16);
  for (int sub = 0; sub < 8; ++sub) {
    int scale, min;
    k_scale_min(sub, packed_scales, &scale, &min);
    const uint8_t* source = packed + 32 * (sub / 2);
    for (int i = 0; i < 32; ++i)
      quants[32 * sub + i] = static_cast<int8_t>(sub % 2 == 0 ? source[i] & 0x0F : source[i] >> 4);
    scales[2 * sub] = scales[2 * sub + 1] = d * static_cast<float>(scale);
    mins[2 * sub] = mins[2 * sub + 1] = dmin * static_cast<float>(min);
  }
}

TESSERA_QUANT_AVX2 float dot_avx2(const std::byte* weight, const ActivationBlock* activation,
                                  int64_t blocks) {
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  __m256 total = _mm256_setzero_ps();
  float min_total = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* block = weight + b * kBlockBytes;
    const ActivationBlock* x = activation + 8 * b;
    const float d = avx2_half(block);
    const uint8_t* packed_scales = bytes_at(block, 4);
    const uint8_t* packed = bytes_at(block, 16);
    float block_mins = 0;  // sum over sub-blocks of min * the activation's sum, in its scale
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i q = avx2_load(packed + 32 * pair);
      const __m256i quants[2] = {_mm256_and_si256(q, low_nibbles),
                                 _mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibbles)};
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * pair + half;
        int scale, min;
        k_scale_min(sub, packed_scales, &scale, &min);
        const ActivationBlock& a = x[sub];
        const __m256i products = avx2_dot_u8_s8(quants[half], avx2_load(a.quants));
        total = _mm256_fmadd_ps(_mm256_set1_ps(d * static_cast<float>(scale) * a.scale),
                                _mm256_cvtepi32_ps(products), total);
        block_mins += a.scale * static_cast<float>(min * (a.half_sums[0] + a.half_sums[1]));
      }
    }
    min_total += avx2_half(block + 2) * block_mins;
  }
  return avx2_sum(total) - min_total;
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q4_k, 12, "Q4_K", unpack, dot_avx2}));

}  // namespace
}  // namespace tessera::quant
