// Q8_0: blocks of 32 (34 bytes): an f16 scale d, then 32 int8 quants; value = d * quant.
#include "kernels/quant/avx2_dot.h"
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

constexpr size_t kBlockBytes = 34;

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  std::memcpy(quants, block + 2, 32);
  scales[0] = scales[1] = read_half(block);
  mins[0] = mins[1] = 0.0f;
}

// Signed by signed through maddubs: |w| (unsigned) times a with w's sign.
TESSERA_QUANT_AVX2 float dot_avx2(const std::byte* weight, const ActivationRow& activation,
                                  int64_t blocks) {
  __m256 total = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* block = weight + b * kBlockBytes;
    const __m256i w = avx2_load(block + 2);
    const __m256i a = avx2_load(activation.quants + 32 * b);
    const __m256i products = avx2_dot_u8_s8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    total = _mm256_fmadd_ps(_mm256_set1_ps(avx2_half(block) * activation.scales[b]),
                            _mm256_cvtepi32_ps(products), total);
  }
  return avx2_sum(total);
}

void quantize(const float* values, std::byte* block) {
  write_half(largest_magnitude(values, 32) / 127.0f, block);
  const float d = read_half(block);
  auto* quants = reinterpret_cast<int8_t*>(block + 2);
  for (int i = 0; i < 32; ++i)
    quants[i] = static_cast<int8_t>(quantize_value(values[i], d, -127, 127));
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q8_0, 8, "Q8_0", unpack, dot_avx2, quantize}));

}  // namespace
}  // namespace tessera::quant
