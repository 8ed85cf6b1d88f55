// Integer dot products of ggml's block formats with activation rows quantized as the CPU quantizes
// them (kernels/quant/activation_blocks.h: an int8 per value, an f32 scale per block of 32 that is
// the same across a weight block, the sums of the quants per 16), four products per dp4a: the
// arithmetic of the CPU's dot products and of llama.cpp's mmvq, so the GPU's decode logits are
// the CPU's up to the order of f32 sums. A format with a Dp4aDot specialization takes this path;
// the others (Q2_K, Q3_K) take the float gemv.
//
// A weight block is read by lanes_per_block consecutive lanes, each taking one part of it (32
// values): load() reads the part's raw bits (a lane keeps `depth` of them in flight, so they are
// kept few registers), decode() unpacks them once, dot() multiplies them with one activation row.
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
  static constexpr int depth = 8;
  struct Raw {
    int quants[2];
    uint32_t d_bits;
  };
  using Part = Raw;
  __device__ static Raw load(const uint8_t* block, int part) {
    const uint8_t* quants = block + 2 + 8 * part;
    return Raw{{load_word_aligned2(quants), load_word_aligned2(quants + 4)},
               *reinterpret_cast<const uint16_t*>(block)};
  }
  __device__ static Part decode(const Raw& raw, int) { return raw; }
  __device__ static float dot(const Part& weight, int part, const ActivationAt& x) {
    const int2 quants = *reinterpret_cast<const int2*>(x.quants + 8 * part);
    const int sum = dot4_add(weight.quants[1], quants.y, dot4_add(weight.quants[0], quants.x, 0));
    return half_bits_to_float(weight.d_bits) * x.scales[0] * static_cast<float>(sum);
  }
};

// Each byte of `bytes` minus `offset` (each byte at most 127 + offset) without borrows between
// bytes: (v + 128 - offset) - 128.
__device__ __forceinline__ int minus_per_byte(uint32_t bytes, uint32_t offset) {
  return static_cast<int>(((bytes | 0x80808080u) - offset * 0x01010101u) ^ 0x80808080u);
}

// Bit i of `bits` (i < 4) as bit 4 of byte i.
__device__ __forceinline__ uint32_t bits_to_byte_fives(uint32_t bits) {
  return ((bits & 1u) << 4) | ((bits & 2u) << 11) | ((bits & 4u) << 18) | ((bits & 8u) << 25);
}

__device__ __forceinline__ int sum_bytes(int x) {
  return dot4_add(0x01010101, x, 0);
}

// The formats of 32 (q4_0, q4_1, q5_0, q5_1): f16 d (and f16 m where values carry an offset),
// 4 bytes of high bits (the 5-bit ones), 16 bytes of nibbles: value j < 16 is the low nibble of
// byte j (with bit j of the high bits on top), value j + 16 its high nibble (bit j + 16); minus 8
// or 16, or times d plus m. Four lanes per block; lane p takes values 4 p .. + 3 and 16 + 4 p ..
// + 3.
template <bool FiveBits, bool WithMin>
struct Dp4aDotOf32 {
  static constexpr bool available = true;
  static constexpr int lanes_per_block = 4;
  static constexpr int depth = 8;
  static constexpr int kHighBitsAt = WithMin ? 4 : 2;
  static constexpr int kNibblesAt = kHighBitsAt + (FiveBits ? 4 : 0);
  struct Raw {
    uint32_t nibbles, high_bits, halves;  // halves: d, and m above it where WithMin
  };
  struct Part {
    int low, high;  // the quants of values 4 p .. + 3 and 16 + 4 p .. + 3, signed unless WithMin
    float d, m;
  };
  __device__ static Raw load(const uint8_t* block, int part) {
    Raw raw;
    raw.nibbles = load_word_aligned2(block + kNibblesAt + 4 * part);
    raw.high_bits = FiveBits ? load_word_aligned2(block + kHighBitsAt) : 0u;
    raw.halves = WithMin ? load_word_aligned2(block) : *reinterpret_cast<const uint16_t*>(block);
    return raw;
  }
  __device__ static Part decode(const Raw& raw, int part) {
    uint32_t low = raw.nibbles & 0x0F0F0F0Fu, high = (raw.nibbles >> 4) & 0x0F0F0F0Fu;
    if constexpr (FiveBits) {
      low |= bits_to_byte_fives((raw.high_bits >> (4 * part)) & 0xFu);
      high |= bits_to_byte_fives((raw.high_bits >> (16 + 4 * part)) & 0xFu);
    }
    Part weight;
    if constexpr (WithMin) {
      weight.low = static_cast<int>(low);
      weight.high = static_cast<int>(high);
      weight.m = half_bits_to_float(raw.halves >> 16);
    } else {
      constexpr uint32_t kOffset = FiveBits ? 16 : 8;
      weight.low = minus_per_byte(low, kOffset);
      weight.high = minus_per_byte(high, kOffset);
      weight.m = 0.0f;
    }
    weight.d = half_bits_to_float(raw.halves & 0xFFFFu);
    return weight;
  }
  __device__ static float dot(const Part& weight, int part, const ActivationAt& x) {
    const int low = *reinterpret_cast<const int*>(x.quants + 4 * part);
    const int high = *reinterpret_cast<const int*>(x.quants + 16 + 4 * part);
    const int products = dot4_add(weight.high, high, dot4_add(weight.low, low, 0));
    const float scale = x.scales[0];
    if constexpr (WithMin)
      return scale * (weight.d * static_cast<float>(products) +
                      weight.m * static_cast<float>(sum_bytes(low) + sum_bytes(high)));
    return weight.d * scale * static_cast<float>(products);
  }
};

template <>
struct Dp4aDot<DType::q4_0> : Dp4aDotOf32<false, false> {};
template <>
struct Dp4aDot<DType::q4_1> : Dp4aDotOf32<false, true> {};
template <>
struct Dp4aDot<DType::q5_0> : Dp4aDotOf32<true, false> {};
template <>
struct Dp4aDot<DType::q5_1> : Dp4aDotOf32<true, true> {};

// Q4_K and Q5_K: f16 d and dmin, 12 bytes of 6-bit scales and mins, (Q5_K: 32 bytes of high bits,
// bit s of byte i for value i of sub-block s), 128 bytes of nibbles (sub-block s: low (even s)
// or high (odd s) nibbles of bytes 32 (s / 2) + i). Eight lanes per block; lane p takes the 16
// nibble bytes 16 p: positions 16 (p % 2) .. + 15 of sub-blocks 2 (p / 2) and 2 (p / 2) + 1.
template <bool FiveBits>
struct Dp4aDotOfK {
  static constexpr bool available = true;
  static constexpr int lanes_per_block = 8;
  static constexpr int depth = 4;
  static constexpr int kNibblesAt = FiveBits ? 48 : 16;
  struct Part {
    int low[4], high[4];
    int scale_low, scale_high, min_low, min_high;
    float d, dmin;
  };
  // The 6-bit scale and min of sub-block s from the three words of the packed 12 bytes.
  __device__ static void scale_and_min(const uint32_t* words, int s, int& scale, int& min) {
    if (s < 4) {
      scale = (words[0] >> (8 * s)) & 63;
      min = (words[1] >> (8 * s)) & 63;
    } else {
      const int j = 8 * (s - 4);
      scale = ((words[2] >> j) & 0x0F) | (((words[0] >> (j + 6)) & 3) << 4);
      min = ((words[2] >> (j + 4)) & 0x0F) | (((words[1] >> (j + 6)) & 3) << 4);
    }
  }
  struct Raw {
    uint4 nibbles, head, high_bits;  // head: d, dmin and the 12 packed bytes
  };
  __device__ static Raw load(const uint8_t* block, int part) {
    Raw raw;
    raw.nibbles = *reinterpret_cast<const uint4*>(block + kNibblesAt + 16 * part);
    raw.head = *reinterpret_cast<const uint4*>(block);
    raw.high_bits = FiveBits ? *reinterpret_cast<const uint4*>(block + 16 + 16 * (part % 2))
                             : uint4{0, 0, 0, 0};
    return raw;
  }
  __device__ static Part decode(const Raw& raw, int part) {
    Part weight;
    const int pair = part / 2;
    const uint32_t words[4] = {raw.nibbles.x, raw.nibbles.y, raw.nibbles.z, raw.nibbles.w};
    const uint32_t tops[4] = {raw.high_bits.x, raw.high_bits.y, raw.high_bits.z, raw.high_bits.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      weight.low[i] = static_cast<int>(words[i] & 0x0F0F0F0Fu);
      weight.high[i] = static_cast<int>((words[i] >> 4) & 0x0F0F0F0Fu);
      if constexpr (FiveBits) {
        weight.low[i] |= static_cast<int>(((tops[i] >> (2 * pair)) & 0x01010101u) << 4);
        weight.high[i] |= static_cast<int>(((tops[i] >> (2 * pair + 1)) & 0x01010101u) << 4);
      }
    }
    const uint32_t scale_words[3] = {raw.head.y, raw.head.z, raw.head.w};
    scale_and_min(scale_words, 2 * pair, weight.scale_low, weight.min_low);
    scale_and_min(scale_words, 2 * pair + 1, weight.scale_high, weight.min_high);
    weight.d = half_bits_to_float(raw.head.x & 0xFFFFu);
    weight.dmin = half_bits_to_float(raw.head.x >> 16);
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

template <>
struct Dp4aDot<DType::q4_k> : Dp4aDotOfK<false> {};
template <>
struct Dp4aDot<DType::q5_k> : Dp4aDotOfK<true> {};

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
  struct Raw {
    uint32_t first[2], second[2], top[2], scales[2];  // scales: the 8 of half n
    uint32_t d_bits;
  };
  struct Part {
    int quants[4][2];  // [quarter][word], each byte the signed quant
    int scales[4];
    float d;
  };
  __device__ static Raw load(const uint8_t* block, int part) {
    Raw raw;
    const int n = part / 4, l = 8 * (part % 4);
#pragma unroll
    for (int word = 0; word < 2; ++word) {
      raw.first[word] = load_word_aligned2(block + 64 * n + l + 4 * word);
      raw.second[word] = load_word_aligned2(block + 64 * n + 32 + l + 4 * word);
      raw.top[word] = load_word_aligned2(block + 128 + 32 * n + l + 4 * word);
      raw.scales[word] = load_word_aligned2(block + 192 + 8 * n + 4 * word);
    }
    raw.d_bits = *reinterpret_cast<const uint16_t*>(block + 208);
    return raw;
  }
  __device__ static Part decode(const Raw& raw, int part) {
    Part weight;
    const int l = 8 * (part % 4);
#pragma unroll
    for (int word = 0; word < 2; ++word) {
      const uint32_t first = raw.first[word], second = raw.second[word], top = raw.top[word];
      const uint32_t unsigned_quants[4] = {
          (first & 0x0F0F0F0Fu) | ((top & 0x03030303u) << 4),
          (second & 0x0F0F0F0Fu) | (((top >> 2) & 0x03030303u) << 4),
          ((first >> 4) & 0x0F0F0F0Fu) | (((top >> 4) & 0x03030303u) << 4),
          ((second >> 4) & 0x0F0F0F0Fu) | (((top >> 6) & 0x03030303u) << 4)};
#pragma unroll
      for (int q = 0; q < 4; ++q) weight.quants[q][word] = minus_per_byte(unsigned_quants[q], 32);
    }
    // Scale 2 q + l / 16 of the half's eight: byte (2 q + l / 16) % 4 of word (2 q + l / 16) / 4.
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int index = 2 * q + l / 16;
      weight.scales[q] = static_cast<int8_t>(raw.scales[index / 4] >> (8 * (index % 4)));
    }
    weight.d = half_bits_to_float(raw.d_bits);
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
