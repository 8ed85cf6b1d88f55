// Q6_K: super-blocks of 256 (210 bytes): 128 bytes of low nibbles, 64 bytes of 2-bit high parts,
// 16 int8 group scales, an f16 d. In half n (128 values), value 32 * k + l (k < 4, l < 32) takes
// the low (k even) or high (k odd: k / 2 = 1) nibble of low byte 64 * n + l + 32 * (k % 2) and
// bits 2 * k of high byte 32 * n + l; value = d * scale * (quant - 32).
#include "kernels/quant/avx2_dot.h"
#include "kernels/quant/block_bytes.h"
#include "kernels/quant/block_format.h"

namespace tessera::quant {
namespace {

constexpr size_t kBlockBytes = 210;

void unpack(const std::byte* block, int8_t* quants, float* scales, float* mins) {
  const uint8_t* low = bytes_at(block, 0);
  const uint8_t* high = bytes_at(block, 128);
  const auto* group_scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = read_half(block + 208);
  for (int n = 0; n < 2; ++n) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t low_byte = low[64 * n + l + 32 * (k % 2)];
        const int nibble = k < 2 ? low_byte & 0x0F : low_byte >> 4;
        const int top = (high[32 * n + l] >> (2 * k)) & 3;
        quants[128 * n + 32 * k + l] = static_cast<int8_t>((nibble | (top << 4)) - 32);
      }
    }
  }
  for (int group = 0; group < 16; ++group) {
    scales[group] = d * static_cast<float>(group_scales[group]);
    mins[group] = 0.0f;
  }
}

// The quants are used unsigned (0..63) against the activations, and 32 times each group's
// activation sum (one multiply-add over the 16 groups) is taken off after. One activation scale
// per super-block: the products times the group scales add up in int32 before one conversion.
TESSERA_QUANT_AVX2 float dot_avx2(const std::byte* weight, const ActivationRow& activation,
                                  int64_t blocks) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i bits_0_1 = _mm256_set1_epi8(0x03), bits_2_3 = _mm256_set1_epi8(0x0C);
  const __m256i bits_4_5 = _mm256_set1_epi8(0x30);
  __m256 total = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const std::byte* block = weight + b * kBlockBytes;
    const uint8_t* low = bytes_at(block, 0);
    const uint8_t* high = bytes_at(block, 128);
    const auto* group_scales = reinterpret_cast<const int8_t*>(block + 192);
    const int8_t* x = activation.quants + 256 * b;
    const __m128i scale_bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(group_scales));
    __m256i sums = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      const __m256i low0 = avx2_load(low + 64 * n), low1 = avx2_load(low + 64 * n + 32);
      const __m256i top = avx2_load(high + 32 * n);
      const __m256i quants[4] = {
          _mm256_or_si256(_mm256_and_si256(low0, nibble),
                          _mm256_slli_epi16(_mm256_and_si256(top, bits_0_1), 4)),
          _mm256_or_si256(_mm256_and_si256(low1, nibble),
                          _mm256_slli_epi16(_mm256_and_si256(top, bits_2_3), 2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low0, 4), nibble),
                          _mm256_and_si256(top, bits_4_5)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low1, 4), nibble),
                          _mm256_and_si256(_mm256_srli_epi16(top, 2), bits_4_5))};
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        // Scales 2 (4 n + k) and + 1 spread over the low and high 128-bit lanes (bytes 0-15 of the
        // 32 values are the first group): one byte shuffle of the scales, widened.
        const int64_t first = 8 * n + 2 * k;
        const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(
            scale_bytes,
            _mm_set_epi64x(0x0101010101010101 * (first + 1), 0x0101010101010101 * first)));
        sums = _mm256_add_epi32(
            sums, _mm256_madd_epi16(
                      _mm256_maddubs_epi16(quants[k], avx2_load(x + 32 * (4 * n + k))), scales16));
      }
    }
    const __m256i all_scales = _mm256_cvtepi8_epi16(scale_bytes);
    const __m256i offsets =
        _mm256_madd_epi16(all_scales, avx2_load(activation.group_sums + 16 * b));
    const float scale = avx2_half(block + 208) * activation.scales[8 * b];
    total = _mm256_fmadd_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(sums), total);
    total = _mm256_fmadd_ps(_mm256_set1_ps(-32 * scale), _mm256_cvtepi32_ps(offsets), total);
  }
  return avx2_sum(total);
}

// Each group of 16 scaled so its largest magnitude is quant 31, the group scales as int8 steps of
// d (the largest over 127).
void quantize(const float* values, std::byte* block) {
  float group_steps[16];
  float largest_step = 0;
  for (int group = 0; group < 16; ++group) {
    group_steps[group] = largest_magnitude(values + 16 * group, 16) / 31.0f;
    largest_step = std::max(largest_step, group_steps[group]);
  }
  write_half(largest_step / 127.0f, block + 208);
  const float d = read_half(block + 208);
  auto* group_scales = reinterpret_cast<int8_t*>(block + 192);
  for (int group = 0; group < 16; ++group)
    group_scales[group] = static_cast<int8_t>(quantize_value(group_steps[group], d, 0, 127));
  auto* low = reinterpret_cast<uint8_t*>(block);
  uint8_t* high = low + 128;
  std::memset(low, 0, 192);
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int index = 128 * n + 32 * k + l;
        const float step = d * static_cast<float>(group_scales[index / 16]);
        const int quant = quantize_value(values[index], step, -32, 31) + 32;
        low[64 * n + l + 32 * (k % 2)] |= static_cast<uint8_t>((quant & 0x0F) << (k < 2 ? 0 : 4));
        high[32 * n + l] |= static_cast<uint8_t>((quant >> 4) << (2 * k));
      }
}

TESSERA_REGISTER_BLOCK_FORMAT((BlockFormat{DType::q6_k, 14, "Q6_K", unpack, dot_avx2, quantize}));

}  // namespace
}  // namespace tessera::quant
