// Bulk conversion of f32/f16/bf16 runs to f32, for kernels that convert an operand once and then
// compute on f32 (GEMM packing). On x86, f16 uses the F16C instructions and bf16 AVX2 where the
// CPU has them: the scalar conversions are several times slower (Half's is branchy).
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "runtime/cpu/cpu_features.h"
#include "runtime/half.h"

#ifdef TESSERA_CPU_X86
#include <immintrin.h>
#endif

namespace tessera::cpu {

#ifdef TESSERA_CPU_X86
__attribute__((target("avx,f16c"))) inline void half_to_float_f16c(const Half* source,
                                                                   int64_t count,
                                                                   float* destination) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source + i));
    _mm256_storeu_ps(destination + i, _mm256_cvtph_ps(bits));
  }
  for (; i < count; ++i) destination[i] = static_cast<float>(source[i]);
}

// bf16 is the upper half of an f32: widen the 16-bit words and shift them up.
__attribute__((target("avx2"))) inline void bfloat16_to_float_avx2(const BFloat16* source,
                                                                   int64_t count,
                                                                   float* destination) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source + i));
    const __m256i widened = _mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16);
    _mm256_storeu_ps(destination + i, _mm256_castsi256_ps(widened));
  }
  for (; i < count; ++i) destination[i] = static_cast<float>(source[i]);
}
#endif

template <typename T>
void load_floats(const T* source, int64_t count, float* destination) {
#ifdef TESSERA_CPU_X86
  if constexpr (std::is_same_v<T, Half>) {
    if (cpu_has_f16c()) return half_to_float_f16c(source, count, destination);
  }
  if constexpr (std::is_same_v<T, BFloat16>) {
    static const bool has_avx2 = __builtin_cpu_supports("avx2");
    if (has_avx2) return bfloat16_to_float_avx2(source, count, destination);
  }
#endif
  for (int64_t i = 0; i < count; ++i) destination[i] = static_cast<float>(source[i]);
}

// A run of `count` elements as f32: the elements themselves when already f32, else converted
// into `scratch`.
template <typename T>
const float* as_floats(const T* source, int64_t count, std::vector<float>& scratch) {
  if constexpr (std::is_same_v<T, float>) {
    return source;
  } else {
    scratch.resize(static_cast<size_t>(count));
    load_floats(source, count, scratch.data());
    return scratch.data();
  }
}

}  // namespace tessera::cpu
