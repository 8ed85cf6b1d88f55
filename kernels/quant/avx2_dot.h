// Shared pieces of the AVX2 dot products of the format files. Every function here and every
// caller carries TESSERA_QUANT_AVX2 (avx2_sum only AVX2 and FMA, a subset): the files are built for
// the baseline CPU, and block_format.cpp calls a format's avx2_dot only where the CPU has AVX2, FMA
// and F16C.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#define TESSERA_QUANT_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace tessera::quant {

TESSERA_QUANT_AVX2 inline float avx2_half(const std::byte* at) {
  uint16_t bits;
  std::memcpy(&bits, at, sizeof(bits));
  return _cvtsh_ss(bits);
}

TESSERA_QUANT_AVX2 inline __m256i avx2_load(const void* at) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(at));
}

// Eight int32 sums of four products each: unsigned bytes times signed bytes (maddubs cannot
// saturate for quants below 64 against activations within +-127).
TESSERA_QUANT_AVX2 inline __m256i avx2_dot_u8_s8(__m256i unsigned_bytes, __m256i signed_bytes) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(unsigned_bytes, signed_bytes),
                           _mm256_set1_epi16(1));
}

// The sum of v's eight lanes. AVX2 and FMA only, so that the CPU's other AVX2 kernels (attention)
// may call it too.
__attribute__((target("avx2,fma"))) inline float avx2_sum(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

}  // namespace tessera::quant
