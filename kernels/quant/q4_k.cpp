// Q4_K: super-blocks of 256 (144 bytes): f16 d and dmin, 12 bytes of 6-bit scales and mins
// (block_bytes.h: k_scales_and_mins), 128 bytes of 4-bit quants. Sub-block s of 32 takes the low
// (even s) or high (odd s) nibbles of bytes 32 * (s / 2) + i; value = d * scale * quant - dmin *
// min.
#include <algorithm>

#include "kernels/quant/avx2_dot.h"
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

constexpr size_t kBlockBytes = 144;

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  k_sub_block_scales(block, scales, mins);
  const uint8_t* packed = bytes_at(block, 16);
  for (int sub = 0; sub < 8; ++sub) {
    const uint8_t* source = packed + 32 * (sub / 2);
    for (int i = 0; i < 32; ++i)
      quants[32 * sub + i] = static_cast<int8_t>(sub % 2 == 0 ? source[i] & 0x0F : source[i] >> 4);
  }
}

// One activation scale per super-block: the eight sub-blocks' products, times their 6-bit scales,
// add up in int32 before one conversion; the mins times the activation's group sums (each min
// twice, for the two groups of 16 of its sub-block) are one multiply-add.
TESSERA_QUANT_AVX2 float dot_avx2(const std::byte* weight, const ActivationRow& activation,
                                  int64_t blocks) {
  const __m256i low_nibbles = _mm256_set1_epi8(0x0F);
  __m256 total = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* block = weight + b * kBlockBytes;
    const int8_t* x = activation.quants + 256 * b;
    const uint8_t* packed = bytes_at(block, 16);
    // The scales and mins stay in registers: bytes stored and read back as one vector would stall
    // on store forwarding.
    const KScalesAndMins packed_scales = k_scales_and_mins(bytes_at(block, 4));
    const __m256i scales = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(packed_scales.scales))));
    __m256i sums = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i q = avx2_load(packed + 32 * pair);
      const __m256i quants[2] = {_mm256_and_si256(q, low_nibbles),
                                 _mm256_and_si256(_mm256_srli_epi16(q, 4), low_nibbles)};
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * pair + half;
        const __m256i products = _mm256_maddubs_epi16(quants[half], avx2_load(x + 32 * sub));
        // int16 lane `sub` of each half of `scales` in all of its lanes.
        const __m256i scale = _mm256_shuffle_epi8(
            scales, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * sub)));
        sums = _mm256_add_epi32(sums, _mm256_madd_epi16(products, scale));
      }
    }
    const __m128i min_bytes = _mm_cvtsi64_si128(static_cast<long long>(packed_scales.mins));
    const __m256i min_pairs = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(min_bytes, min_bytes));
    const __m256i min_products =
        _mm256_madd_epi16(min_pairs, avx2_load(activation.group_sums + 16 * b));
    const float activation_scale = activation.scales[8 * b];
    total = _mm256_fmadd_ps(_mm256_set1_ps(avx2_half(block) * activation_scale),
                            _mm256_cvtepi32_ps(sums), total);
    total = _mm256_fmadd_ps(_mm256_set1_ps(-avx2_half(block + 2) * activation_scale),
                            _mm256_cvtepi32_ps(min_products), total);
  }
  return avx2_sum(total);
}

// Each sub-block of 32 spans [min(values, 0), max(values)] in 15 steps; the steps and the amounts
// taken off as 6-bit multiples of d and dmin (the largest of each over 63).
void quantize(const float* values, std::byte* block) {
  float steps[8], offsets[8];
  float largest_step = 0, largest_offset = 0;
  for (int sub = 0; sub < 8; ++sub) {
    const float* sub_values = values + 32 * sub;
    const float low = std::min(0.0f, *std::min_element(sub_values, sub_values + 32));
    const float high = *std::max_element(sub_values, sub_values + 32);
    steps[sub] = (high - low) / 15.0f;
    offsets[sub] = -low;
    largest_step = std::max(largest_step, steps[sub]);
    largest_offset = std::max(largest_offset, offsets[sub]);
  }
  write_half(largest_step / 63.0f, block);
  write_half(largest_offset / 63.0f, block + 2);
  const float d = read_half(block), dmin = read_half(block + 2);
  uint8_t scales[8], mins[8];
  for (int sub = 0; sub < 8; ++sub) {
    scales[sub] = static_cast<uint8_t>(quantize_value(steps[sub], d, 0, 63));
    mins[sub] = static_cast<uint8_t>(quantize_value(offsets[sub], dmin, 0, 63));
  }
  auto* packed = reinterpret_cast<uint8_t*>(block + 4);  // the layout k_scales_and_mins reads
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(scales[j] | ((scales[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>(mins[j] | ((mins[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((scales[j + 4] & 0x0F) | ((mins[j + 4] & 0x0F) << 4));
  }
  auto* quants = reinterpret_cast<uint8_t*>(block + 16);
  std::memset(quants, 0, 128);
  for (int sub = 0; sub < 8; ++sub) {
    const float step = d * static_cast<float>(scales[sub]);
    const float offset = dmin * static_cast<float>(mins[sub]);
    for (int i = 0; i < 32; ++i) {
      const int quant = quantize_value(values[32 * sub + i] + offset, step, 0, 15);
      quants[32 * (sub / 2) + i] |= static_cast<uint8_t>(quant << (sub % 2 == 0 ? 0 : 4));
    }
  }
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q4_k, 12, "Q4_K", unpack, dot_avx2, quantize}));

}  // namespace
}  // namespace tessera::quant
