// How the tensor-core decode kernel (attention_decode_mma.cuh) reads an FP8 cache: K and V tiles
// of e4m3 codes in shared memory go straight into f16 mma B fragments, with no tile of T.
//
// Why this layout: a B fragment register holds two values adjacent along k, which in a row-major
// tile of bytes takes one 8- or 16-bit load each plus the shifts to pair them: more instructions
// than the bytes are worth, so that a large batch ran slower than with a bf16 cache. A dot
// product does not depend on the order of its terms, so the kernel picks which physical column
// each fragment position stands for, such that a lane reads its codes with wide loads:
//   - S = Q K^T: in k step s, lane (g, q)'s A registers 0, 1 and B register 0 hold the head
//     columns q H/4 + 4s + {0, 1}, A registers 2, 3 and B register 1 the columns + {2, 3}. A lane
//     reads H/4 consecutive codes of its key per key group, and its query the same way.
//   - O += P V: B column g of output group n is the head column C g + n (C = H/8, the output
//     groups). A lane reads C consecutive codes of each of its four keys per 16 keys; its output
//     values are the head columns 2 q C ... 2 q C + 2C - 1 of its two rows.
// The mma runs in f16: every e4m3 value is an f16 value (one conversion per two codes), and so are
// the probabilities, to 2^-24. A bf16 query is scaled by a power of two where it would pass f16's
// range, and the scores by its inverse.
//
// H here is the width of a tile's rows: a kv head's codes, or two adjacent kv heads' (heads of
// 64: their codes lie side by side in the cache, so that a warp taking both reads rows of 128
// bytes, whole lines, not halves). Two kv heads' q heads share the fragments' 16 rows as a
// block-diagonal query: a row holds its head's values in its kv head's 64 columns and zeros in
// the other's, so that one S = Q K^T scores each row against its own keys; of O = P V a row
// keeps its own kv head's columns.
#pragma once

#include "kernels/cuda/gpu_vendor.h"

#if !defined(TESSERA_GPU_HIP)

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention/attention_mma_tile.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/mma.cuh"

namespace tessera::gpu::attention {

// Row strides, in bytes, of a warp's K and V tiles of codes: the reads below of one memory
// transaction (two keys' rows of K; four keys' rows of V, two apart) then fall on distinct banks.
template <int kHeadSize>
inline constexpr int kKeyCodeStride = kHeadSize == 64 ? 64 : kHeadSize + 16;
template <int kHeadSize>
inline constexpr int kValueCodeStride = kHeadSize + 16;

// Two codes (the low 16 bits; the first in the low byte) as an f16 pair, the first in the low half.
__device__ __forceinline__ uint32_t codes_to_half_pair(uint32_t codes) {
  const __half2_raw pair =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(pair.x) | (static_cast<uint32_t>(pair.y) << 16);
}

// The warp's query rows as f16 A fragments in the layout above: `low` and `high` point at the
// H / 4 values of the lane's columns of its rows g and g + 8 (null: zeros). Returns the factor the
// scores need: 1, or for a bf16 query whose largest magnitude in the warp would pass f16's range,
// the power of two the query was divided by.
template <typename T, int kHeadSize>
__device__ __forceinline__ float load_code_query_fragments(
    const T* low, const T* high, uint32_t (&fragments)[kHeadSize / 16][4]) {
  constexpr int kColumns = kHeadSize / 4;  // of each row, per lane
  float values[2][kColumns];
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    const T* source = row == 0 ? low : high;
#pragma unroll
    for (int chunk = 0; chunk < kColumns / 8; ++chunk) {
      const Pack<T, 8> pack = source != nullptr ? load_pack<8>(source + chunk * 8) : Pack<T, 8>{};
#pragma unroll
      for (int e = 0; e < 8; ++e) values[row][chunk * 8 + e] = to_compute(pack.values[e]);
    }
  }
  float score_factor = 1.0f;
  if constexpr (!std::is_same_v<T, gpu_half>) {
    float largest = 0.0f;  // fmaxf passes over NaN, which stays NaN in f16
#pragma unroll
    for (int row = 0; row < 2; ++row)
#pragma unroll
      for (int c = 0; c < kColumns; ++c) largest = fmaxf(largest, fabsf(values[row][c]));
#pragma unroll
    for (int mask = 16; mask > 0; mask /= 2) largest = fmaxf(largest, GPU_SHFL_XOR(largest, mask));
    int exponent = 0;
    frexpf(largest, &exponent);           // largest < 2^exponent
    constexpr int kLargestExponent = 15;  // values below 2^15 fit f16 (largest finite 65504)
    if (isfinite(largest) && exponent > kLargestExponent) {
      score_factor = ldexpf(1.0f, exponent - kLargestExponent);
      const float divide = 1.0f / score_factor;  // a power of two: exact
#pragma unroll
      for (int row = 0; row < 2; ++row)
#pragma unroll
        for (int c = 0; c < kColumns; ++c) values[row][c] *= divide;
    }
  }
#pragma unroll
  for (int step = 0; step < kHeadSize / 16; ++step) {
    fragments[step][0] = pack_pair<gpu_half>(values[0][4 * step], values[0][4 * step + 1]);
    fragments[step][1] = pack_pair<gpu_half>(values[1][4 * step], values[1][4 * step + 1]);
    fragments[step][2] = pack_pair<gpu_half>(values[0][4 * step + 2], values[0][4 * step + 3]);
    fragments[step][3] = pack_pair<gpu_half>(values[1][4 * step + 2], values[1][4 * step + 3]);
  }
  return score_factor;
}

// scores = Q K^T over a K tile of codes ([key][kKeyCodeStride] bytes), kKeyGroups x 8 keys.
template <int kHeadSize, int kKeyGroups>
__device__ __forceinline__ void score_code_tile(const uint32_t (&q_fragments)[kHeadSize / 16][4],
                                                const uint8_t* k_codes, int lane,
                                                float (&scores)[kKeyGroups][4]) {
  constexpr int kSteps = kHeadSize / 16;  // also the 32-bit words of a lane's codes of a key
  const uint8_t* first_row =
      k_codes + lane / 4 * kKeyCodeStride<kHeadSize> + lane % 4 * (kHeadSize / 4);
#pragma unroll
  for (int n = 0; n < kKeyGroups; ++n) {
    uint32_t words[kSteps];
#pragma unroll
    for (int chunk = 0; chunk < kSteps / 4; ++chunk) {
      const uint4 loaded = *reinterpret_cast<const uint4*>(
          first_row + n * 8 * kKeyCodeStride<kHeadSize> + chunk * 16);
      words[4 * chunk] = loaded.x;
      words[4 * chunk + 1] = loaded.y;
      words[4 * chunk + 2] = loaded.z;
      words[4 * chunk + 3] = loaded.w;
    }
    scores[n][0] = scores[n][1] = scores[n][2] = scores[n][3] = 0.0f;
#pragma unroll
    for (int step = 0; step < kSteps; ++step)
      mma_16x8x16<gpu_half>(scores[n], q_fragments[step], codes_to_half_pair(words[step]),
                            codes_to_half_pair(words[step] >> 16));
  }
}

// The `kWords` 32-bit words at `source` (8 or 16 bytes, aligned to their size).
template <int kWords>
__device__ __forceinline__ void load_code_words(const uint8_t* source, uint32_t (&words)[kWords]) {
  static_assert(kWords == 2 || kWords == 4);
  if constexpr (kWords == 2) {
    const uint2 loaded = *reinterpret_cast<const uint2*>(source);
    words[0] = loaded.x;
    words[1] = loaded.y;
  } else {
    const uint4 loaded = *reinterpret_cast<const uint4*>(source);
    words[0] = loaded.x;
    words[1] = loaded.y;
    words[2] = loaded.z;
    words[3] = loaded.w;
  }
}

// out += P V over a V tile of codes ([key][kValueCodeStride] bytes), 16 keys per step; P (the
// softmax's exponents in `scores`) as f16. The output columns are in the layout above.
template <int kHeadSize, int kKeyGroups>
__device__ __forceinline__ void accumulate_code_tile(const float (&scores)[kKeyGroups][4],
                                                     const uint8_t* v_codes, int lane,
                                                     float (&out)[kHeadSize / 8][4]) {
  constexpr int kOutGroups = kHeadSize / 8;  // also the codes a lane reads of each key
  constexpr int kWords = kOutGroups / 4;
  constexpr int kStride = kValueCodeStride<kHeadSize>;
  const uint8_t* first = v_codes + 2 * (lane % 4) * kStride + lane / 4 * kOutGroups;
#pragma unroll
  for (int step = 0; step < kKeyGroups / 2; ++step) {
    uint32_t p[4];
    probability_fragments<gpu_half>(scores, step, p);
    // Keys 16 step + 2 (lane % 4) + {0, 1} (B register 0) and + {8, 9} (B register 1).
    uint32_t key[4][kWords];
    const uint8_t* rows = first + step * 16 * kStride;
    load_code_words(rows, key[0]);
    load_code_words(rows + kStride, key[1]);
    load_code_words(rows + 8 * kStride, key[2]);
    load_code_words(rows + 9 * kStride, key[3]);
#pragma unroll
    for (int word = 0; word < kWords; ++word) {
      // Each key's codes of output groups 4 word ... 4 word + 3, paired across adjacent keys.
      const uint32_t pairs[2][2] = {{__byte_perm(key[0][word], key[1][word], 0x5140),
                                     __byte_perm(key[0][word], key[1][word], 0x7362)},
                                    {__byte_perm(key[2][word], key[3][word], 0x5140),
                                     __byte_perm(key[2][word], key[3][word], 0x7362)}};
#pragma unroll
      for (int group = 0; group < 4; ++group) {
        const int shift = group % 2 * 16;
        mma_16x8x16<gpu_half>(out[4 * word + group], p,
                              codes_to_half_pair(pairs[0][group / 2] >> shift),
                              codes_to_half_pair(pairs[1][group / 2] >> shift));
      }
    }
  }
}

// The tile column that the lane's accumulator out[0][0] stands for: out[n][e] is column
// code_output_column + n + (e % 2) H / 8 (e and e + 2 share a column).
template <int kHeadSize>
__device__ __forceinline__ int code_output_column(int lane) {
  return kHeadSize / 8 * 2 * (lane % 4);
}

// One of the lane's rows of out (`half` 0: row g, 1: row g + 8) times `factor`, stored at
// `target`: the row's 2 H / 8 values from code_output_column on (aligned to 16 bytes).
template <int kHeadSize, typename Out>
__device__ __forceinline__ void store_code_output_row(const float (&out)[kHeadSize / 8][4],
                                                      int half, float factor, Out* target) {
  constexpr int kOutGroups = kHeadSize / 8;
  Pack<Out, 2 * kOutGroups> values;
#pragma unroll
  for (int n = 0; n < kOutGroups; ++n) {
    values.values[n] = from_compute<Out>(out[n][2 * half] * factor);
    values.values[kOutGroups + n] = from_compute<Out>(out[n][2 * half + 1] * factor);
  }
  constexpr int kPerStore = kPackElements<Out>;
#pragma unroll
  for (int chunk = 0; chunk < 2 * kOutGroups / kPerStore; ++chunk) {
    Pack<Out, kPerStore> part;
#pragma unroll
    for (int e = 0; e < kPerStore; ++e) part.values[e] = values.values[chunk * kPerStore + e];
    store_pack<kPerStore>(target + chunk * kPerStore, part);
  }
}

}  // namespace tessera::gpu::attention

#endif  // !TESSERA_GPU_HIP
