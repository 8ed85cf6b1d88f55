// Integer dot products of ggml's block formats with activation rows quantized as the CPU quantizes
// them (kernels/quant/activation_blocks.h: an int8 per value, an f32 scale per block of 32 that is
// the same across a weight block, the sums of the quants per 16), four products per dp4a: the
// arithmetic of the CPU's dot products and of llama.cpp's mmvq, so the GPU's decode logits are
// the CPU's up to the order of f32 sums. A format with a Dp4aDot specialization takes this path;
// the others take the float gemv.
//
// A weight block is read by lanes_per_block consecutive lanes, each taking one part of it (32
// values); load() reads the part's weight bits once, dot() multiplies them with one activation row;
// a lane keeps `depth` parts in flight.
#pragma once

#include <cstdint>

#include "kernels/cuda/gemm/quantized_blocks.cuh"

namespace tessera::gpu {

// c + the sum of the four products of a's and b's signed bytes.
__device__ __forceinline__ int dot4_add(int a, int b, int c) {
#if defined(TESSERA_GPU_HIP)
#pragma unroll
  for (int i = 0; i < 4; ++i)
    c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  return c;
#else
  return __dp4a(a, b, c);
#endif
}

// Four bytes of a block whose blocks are only 2-byte aligned (q8_0's 34, q6_k's 210).
__device__ __forceinline__ int load_word_aligned2(const uint8_t* at) {
  const auto* halves = reinterpret_cast<const uint16_t*>(at);
  return static_cast<int>(halves[0] | (uint32_t{halves[1]} << 16));
}

__device__ __forceinline__ float load_half_aligned2(const uint8_t* at) {
  return half_bits_to_float(*reinterpret_cast<const uint16_t*>(at));
}

// The activation row at a weight block's first value.
struct ActivationAt {
  const int8_t* quants;       // 16-byte aligned
  const float* scales;        // per 32 values
  const int16_t* group_sums;  // per 16 values
};

template <DType D>
struct Dp4aDot {
  static constexpr bool available = false;
};

// Q8_0: 2 bytes f16 d, 32 int8. Four lanes per block, 8 values each.
template <>
struct Dp4aDot<DType::q8_0> {
  static constexpr bool available = true;
  static constexpr int lanes_per_block = 4;
  static constexpr int depth = 8;  // parts a lane loads ahead
  struct Part {
    int quants[2];
    float d;
  };
  __device__ static Part load(const uint8_t* block, int part) {
    const uint8_t* quants = block + 2 + 8 * part;
    return Part{{load_word_aligned2(quants), load_word_aligned2(quants + 4)},
                load_half_aligned2(block)};
  }
  __device__ static float dot(const Part& weight, int part, const ActivationAt& x) {
    const int2 quants = *reinterpret_cast<const int2*>(x.quants + 8 * part);
    const int sum = dot4_add(weight.quants[1], quants.y, dot4_add(weight.quants[0], quants.x, 0));
    return weight.d * x.scales[0] * static_cast<float>(sum);
  }
};

// Q4_K: f16 d and dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles (sub-block s:
// low (even s) or high (odd s) nibbles of bytes 32 * (s / 2) + i). Eight lanes per block; lane p
// takes the 16 bytes 16 p: positions 16 (p % 2) .. + 15 of sub-blocks 2 (p / 2) and 2 (p / 2) + 1.
template <>
struct Dp4aDot<DType::q4_k> {
  static constexpr bool available = true;
  static constexpr int lanes_per_block = 8;
  static constexpr int depth = 4;
  struct Part {
    int low[4], high[4];
    int scale_low, scale_high, min_low, min_high;
    float d, dmin;
  };
  __device__ static Part load(const uint8_t* block, int part) {
    Part weight;
    const uint4 packed = *reinterpret_cast<const uint4*>(block + 16 + 16 * part);
    const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      weight.low[i] = static_cast<int>(words[i] & 0x0F0F0F0Fu);
      weight.high[i] = static_cast<int>((words[i] >> 4) & 0x0F0F0F0Fu);
    }
    const int pair = part / 2;
    k_scale_and_min(block + 4, 2 * pair, weight.scale_low, weight.min_low);
    k_scale_and_min(block + 4, 2 * pair + 1, weight.scale_high, weight.min_high);
    const uint32_t halves = *reinterpret_cast<const uint32_t*>(block);
    weight.d = half_bits_to_float(halves & 0xFFFFu);
    weight.dmin = half_bits_to_float(halves >> 16);
    return weight;
  }
  __device__ static float dot(const Part& weight, int part, const ActivationAt& x) {
    const int offset = 64 * (part / 2) + 16 * (part % 2);
    const int4 low = *reinterpret_cast<const int4*>(x.quants + offset);
    const int4 high = *reinterpret_cast<const int4*>(x.quants + offset + 32);
    int sum_low = dot4_add(weight.low[0], low.x, 0), sum_high = dot4_add(weight.high[0], high.x, 0);
    sum_low = dot4_add(weight.low[1], low.y, sum_low);
    sum_high = dot4_add(weight.high[1], high.y, sum_high);
    sum_low = dot4_add(weight.low[2], low.z, sum_low);
    sum_high = dot4_add(weight.high[2], high.z, sum_high);
    sum_low = dot4_add(weight.low[3], low.w, sum_low);
    sum_high = dot4_add(weight.high[3], high.w, sum_high);
    const int products = weight.scale_low * sum_low + weight.scale_high * sum_high;
    const int mins = weight.min_low * x.group_sums[offset / 16] +
                     weight.min_high * x.group_sums[(offset + 32) / 16];
    const float scale = x.scales[0];
    return weight.d * scale * static_cast<float>(products) -
           weight.dmin * scale * static_cast<float>(mins);
  }
};

// Q6_K: 128 bytes of low nibbles, 64 of high 2 bits, 16 int8 scales, f16 d. In half n (128
// values), value 32 q + l (quarter q < 4, l < 32) is the low (q < 2) or high nibble of byte
// 64 n + 32 (q % 2) + l with bits 2 q of byte 128 + 32 n + l on top, minus 32; its scale is
// 8 n + 2 q + l / 16. Eight lanes per block; lane p takes l = 8 (p % 4) .. + 7 of half p / 4 in
// all four quarters.
template <>
struct Dp4aDot<DType::q6_k> {
  static constexpr bool available = true;
  static constexpr int lanes_per_block = 8;
  static constexpr int depth = 4;
  struct Part {
    int quants[4][2];  // [quarter][word], each byte the signed quant
    int scales[4];
    float d;
  };
  __device__ static Part load(const uint8_t* block, int part) {
    Part weight;
    const int n = part / 4, l = 8 * (part % 4);
#pragma unroll
    for (int word = 0; word < 2; ++word) {
      const uint32_t first = load_word_aligned2(block + 64 * n + l + 4 * word);
      const uint32_t second = load_word_aligned2(block + 64 * n + 32 + l + 4 * word);
      const uint32_t top = load_word_aligned2(block + 128 + 32 * n + l + 4 * word);
      const uint32_t unsigned_quants[4] = {
          (first & 0x0F0F0F0Fu) | ((top & 0x03030303u) << 4),
          (second & 0x0F0F0F0Fu) | (((top >> 2) & 0x03030303u) << 4),
          ((first >> 4) & 0x0F0F0F0Fu) | (((top >> 4) & 0x03030303u) << 4),
          ((second >> 4) & 0x0F0F0F0Fu) | (((top >> 6) & 0x03030303u) << 4)};
      // Each byte minus 32 without borrows between bytes: (v + 128 - 32) - 128.
#pragma unroll
      for (int q = 0; q < 4; ++q)
        weight.quants[q][word] =
            static_cast<int>(((unsigned_quants[q] | 0x80808080u) - 0x20202020u) ^ 0x80808080u);
    }
    const auto* group_scales = reinterpret_cast<const int8_t*>(block + 192);
#pragma unroll
    for (int q = 0; q < 4; ++q) weight.scales[q] = group_scales[8 * n + 2 * q + l / 16];
    weight.d = load_half_aligned2(block + 208);
    return weight;
  }
  __device__ static float dot(const Part& weight, int part, const ActivationAt& x) {
    const int n = part / 4, l = 8 * (part % 4);
    int products = 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int2 quants = *reinterpret_cast<const int2*>(x.quants + 128 * n + 32 * q + l);
      const int sum =
          dot4_add(weight.quants[q][1], quants.y, dot4_add(weight.quants[q][0], quants.x, 0));
      products += weight.scales[q] * sum;
    }
    return weight.d * x.scales[0] * static_cast<float>(products);
  }
};

}  // namespace tessera::gpu
