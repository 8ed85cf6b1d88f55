// ggml's block formats on the device: the 32 values of one chunk of a block (a whole block of the
// formats of 32; sub-block `chunk` of 8 for those of 256), dequantized into registers with the same
// float operations as the CPU's unpack (kernels/quant/q*.cpp) and llama.cpp: scale times quant,
// then the min taken off, never fused.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"

namespace tessera::gpu {

template <DType D>
struct BlockLayout {
  static constexpr int elements = static_cast<int>(quantized_block(D).elements);
  static constexpr int bytes = static_cast<int>(quantized_block(D).bytes);
};

// f16 bits to f32, exactly (subnormals included).
__device__ __forceinline__ float half_bits_to_float(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float value = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -value : value;
  }
  if (exponent == 31) return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
  return __uint_as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// An f16 field of a block; blocks are byte-aligned, so read by bytes.
__device__ __forceinline__ float block_half(const uint8_t* at) {
  return half_bits_to_float(at[0] | (uint32_t{at[1]} << 8));
}

__device__ __forceinline__ uint32_t block_word(const uint8_t* at) {
  return at[0] | (uint32_t{at[1]} << 8) | (uint32_t{at[2]} << 16) | (uint32_t{at[3]} << 24);
}

// scale * quant - min and scale * quant + min, rounded after each operation as the CPU and
// llama.cpp do (nvcc would otherwise fuse them into one FMA).
__device__ __forceinline__ float scaled_minus(float scale, int quant, float min) {
  return __fsub_rn(__fmul_rn(scale, static_cast<float>(quant)), min);
}
__device__ __forceinline__ float scaled_plus(float scale, int quant, float min) {
  return __fadd_rn(__fmul_rn(static_cast<float>(quant), scale), min);
}

// The scale and min of sub-block s of a q4_k/q5_k super-block's 12 packed bytes.
__device__ __forceinline__ void k_scale_and_min(const uint8_t* packed, int s, int& scale,
                                                int& min) {
  if (s < 4) {
    scale = packed[s] & 63;
    min = packed[s + 4] & 63;
  } else {
    scale = (packed[s + 4] & 0x0F) | ((packed[s - 4] >> 6) << 4);
    min = (packed[s + 4] >> 4) | ((packed[s] >> 6) << 4);
  }
}

// values[0, 32) = the values of chunk `chunk` of `block`.
template <DType D>
__device__ __forceinline__ void dequantize_chunk(const uint8_t* block, int chunk, float* values) {
  if constexpr (D == DType::q4_0 || D == DType::q4_1) {
    const bool with_min = D == DType::q4_1;
    const float d = block_half(block), m = with_min ? block_half(block + 2) : 0.0f;
    const uint8_t* packed = block + (with_min ? 4 : 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int low = packed[j] & 0x0F, high = packed[j] >> 4;
      values[j] = with_min ? scaled_plus(d, low, m) : static_cast<float>(low - 8) * d;
      values[j + 16] = with_min ? scaled_plus(d, high, m) : static_cast<float>(high - 8) * d;
    }
  } else if constexpr (D == DType::q5_0 || D == DType::q5_1) {
    const bool with_min = D == DType::q5_1;
    const float d = block_half(block), m = with_min ? block_half(block + 2) : 0.0f;
    const uint32_t high_bits = block_word(block + (with_min ? 4 : 2));
    const uint8_t* packed = block + (with_min ? 8 : 6);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int low = (packed[j] & 0x0F) | (((high_bits >> j) & 1) << 4);
      const int high = (packed[j] >> 4) | (((high_bits >> (j + 16)) & 1) << 4);
      values[j] = with_min ? scaled_plus(d, low, m) : static_cast<float>(low - 16) * d;
      values[j + 16] = with_min ? scaled_plus(d, high, m) : static_cast<float>(high - 16) * d;
    }
  } else if constexpr (D == DType::q8_0) {
    const float d = block_half(block);
    const auto* quants = reinterpret_cast<const int8_t*>(block + 2);
#pragma unroll
    for (int j = 0; j < 32; ++j) values[j] = static_cast<float>(quants[j]) * d;
  } else if constexpr (D == DType::q2_k) {
    const float d = block_half(block + 80), dmin = block_half(block + 82);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int group = 2 * chunk + half;
      const int n = group / 8, shift = 2 * ((group % 8) / 2);
      const uint8_t* source = block + 16 + 32 * n + 16 * (group % 2);
      const uint8_t scale_byte = block[group];
      const float scale = d * static_cast<float>(scale_byte & 0x0F);
      const float min = dmin * static_cast<float>(scale_byte >> 4);
#pragma unroll
      for (int i = 0; i < 16; ++i)
        values[16 * half + i] = scaled_minus(scale, (source[i] >> shift) & 3, min);
    }
  } else if constexpr (D == DType::q3_k) {
    const float d = block_half(block + 108);
    const uint8_t* scale_bytes = block + 96;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int group = 2 * chunk + half;
      const int n = group / 8, j = (group % 8) / 2, side = group % 2;
      const int i4 = group % 4, quarter = group / 4;
      const uint8_t low_source = scale_bytes[quarter % 2 == 0 ? i4 : 4 + i4];
      const int low = quarter < 2 ? (low_source & 0x0F) : (low_source >> 4);
      const int top = (scale_bytes[8 + i4] >> (2 * quarter)) & 3;
      const float scale = d * static_cast<float>((low | (top << 4)) - 32);
      const uint8_t* source = block + 32 + 32 * n + 16 * side;
      const uint8_t* high = block + 16 * side;
      const uint8_t mask = static_cast<uint8_t>(1 << (4 * n + j));
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int quant = ((source[i] >> (2 * j)) & 3) - ((high[i] & mask) ? 0 : 4);
        values[16 * half + i] = scaled_minus(scale, quant, 0.0f);
      }
    }
  } else if constexpr (D == DType::q4_k || D == DType::q5_k) {
    const float d = block_half(block), dmin = block_half(block + 2);
    int scale_bits, min_bits;
    k_scale_and_min(block + 4, chunk, scale_bits, min_bits);
    const float scale = d * static_cast<float>(scale_bits);
    const float min = dmin * static_cast<float>(min_bits);
    const bool five_bits = D == DType::q5_k;
    const uint8_t* source = block + (five_bits ? 48 : 16) + 32 * (chunk / 2);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      int quant = chunk % 2 == 0 ? source[i] & 0x0F : source[i] >> 4;
      if (five_bits) quant |= ((block[16 + i] >> chunk) & 1) << 4;
      values[i] = scaled_minus(scale, quant, min);
    }
  } else if constexpr (D == DType::q6_k) {
    const float d = block_half(block + 208);
    const auto* group_scales = reinterpret_cast<const int8_t*>(block + 192);
    const int n = chunk / 4, k = chunk % 4;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const uint8_t low_byte = block[64 * n + l + 32 * (k % 2)];
      const int nibble = k < 2 ? low_byte & 0x0F : low_byte >> 4;
      const int top = (block[128 + 32 * n + l] >> (2 * k)) & 3;
      const float scale = d * static_cast<float>(group_scales[8 * n + 2 * k + l / 16]);
      values[l] = scaled_minus(scale, (nibble | (top << 4)) - 32, 0.0f);
    }
  }
}

// Calls fn.template operator()<D>() for the quantized dtype `dtype`.
template <typename Fn>
void visit_quantized_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::q4_0:
      return fn.template operator()<DType::q4_0>();
    case DType::q4_1:
      return fn.template operator()<DType::q4_1>();
    case DType::q5_0:
      return fn.template operator()<DType::q5_0>();
    case DType::q5_1:
      return fn.template operator()<DType::q5_1>();
    case DType::q8_0:
      return fn.template operator()<DType::q8_0>();
    case DType::q2_k:
      return fn.template operator()<DType::q2_k>();
    case DType::q3_k:
      return fn.template operator()<DType::q3_k>();
    case DType::q4_k:
      return fn.template operator()<DType::q4_k>();
    case DType::q5_k:
      return fn.template operator()<DType::q5_k>();
    case DType::q6_k:
      return fn.template operator()<DType::q6_k>();
    default:
      break;
  }
}

}  // namespace tessera::gpu
