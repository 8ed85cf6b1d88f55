// The per-tile steps the two tensor-core attention kernels share (prefill:
// attention_prefill_mma.cuh, decode: attention_decode_mma.cuh). A warp holds 16 query rows as
// mma A fragments; a lane's rows are g and g + 8 ("low" and "high"), and a key tile of
// kKeyGroups x 8 keys sits in shared memory, rows kStride elements apart (fragment layouts:
// kernels/cuda/mma.cuh).
#pragma once

#include "kernels/cuda/gpu_vendor.h"

#if !defined(TESSERA_GPU_HIP)

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/mma.cuh"

namespace tessera::gpu::attention {

// The element types the tensor-core kernels take.
template <typename T>
inline constexpr bool kHasMmaAttention =
    std::is_same_v<T, gpu_bfloat16> || std::is_same_v<T, gpu_half>;

// Two values rounded to T in one 32-bit register, `low` in the low half (the mma's order).
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float low, float high) {
  const T pair[2] = {from_compute<T>(low), from_compute<T>(high)};
  uint32_t bits;
  memcpy(&bits, pair, sizeof(bits));
  return bits;
}

// An FP8 cache's chunk of 8 codes (zeros where !valid), and the chunk into a tile of T, exact:
// every e4m3 value is a bf16 and an f16 value. The kernels load all of a tile's chunks before
// they store any, so that the loads are in flight together.
using CodeChunk = Pack<Float8E4M3, 8>;
__device__ __forceinline__ CodeChunk load_code_chunk(const Float8E4M3* source, bool valid) {
  return valid ? load_pack<8>(source) : CodeChunk{};
}
template <typename T>
__device__ __forceinline__ void store_decoded_chunk(T* target, const CodeChunk& codes) {
  Pack<T, 8> decoded;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  // Two codes per conversion instruction (the same values as Float8E4M3::to_float).
#pragma unroll
  for (int e = 0; e < 8; e += 2) {
    const auto pair =
        static_cast<__nv_fp8x2_storage_t>(codes.values[e].bits | (codes.values[e + 1].bits << 8));
    const float2 values = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
    decoded.values[e] = from_compute<T>(values.x);
    decoded.values[e + 1] = from_compute<T>(values.y);
  }
#else
#pragma unroll
  for (int e = 0; e < 8; ++e)
    decoded.values[e] = from_compute<T>(static_cast<float>(codes.values[e]));
#endif
  store_pack<8>(target, decoded);
}

// Two consecutive elements of a row as one 32-bit register; zero when there is no row.
template <typename T>
__device__ __forceinline__ uint32_t load_pair(const T* row, int column) {
  if (row == nullptr) return 0;
  return *reinterpret_cast<const uint32_t*>(row + column);
}

// The A fragments of a warp's 16 query rows (a lane's rows `low` and `high`, null for rows
// past the query: zeros), kSteps steps of 16 columns.
template <typename T, int kSteps>
__device__ __forceinline__ void load_query_fragments(const T* low, const T* high, int quad_lane,
                                                     uint32_t (&fragments)[kSteps][4]) {
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int column = step * 16 + 2 * quad_lane;
    fragments[step][0] = load_pair(low, column);
    fragments[step][1] = load_pair(high, column);
    fragments[step][2] = load_pair(low, column + 8);
    fragments[step][3] = load_pair(high, column + 8);
  }
}

// scores = Q K^T for the warp's 16 rows (kSteps k steps of 16) and the tile's keys;
// key_fragments(step, n, b) gives the B fragments of key groups n and n + 1 (b[0..1], b[2..3]).
template <typename T, int kSteps, int kKeyGroups, typename KeyFragments>
__device__ __forceinline__ void score_keys(const uint32_t (&q_fragments)[kSteps][4],
                                           float (&scores)[kKeyGroups][4],
                                           KeyFragments key_fragments) {
  static_assert(kKeyGroups % 2 == 0);
#pragma unroll
  for (int n = 0; n < kKeyGroups; ++n)
    scores[n][0] = scores[n][1] = scores[n][2] = scores[n][3] = 0.0f;
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
#pragma unroll
    for (int n = 0; n < kKeyGroups; n += 2) {
      uint32_t b[4];
      key_fragments(step, n, b);
      mma_16x8x16<T>(scores[n], q_fragments[step], b[0], b[1]);
      mma_16x8x16<T>(scores[n + 1], q_fragments[step], b[2], b[3]);
    }
  }
}

// score_keys over a K tile of T.
template <typename T, int kSteps, int kKeyGroups, int kStride>
__device__ __forceinline__ void score_tile(const uint32_t (&q_fragments)[kSteps][4],
                                           const T* k_tile, int lane,
                                           float (&scores)[kKeyGroups][4]) {
  score_keys<T>(q_fragments, scores, [&](int step, int n, uint32_t(&b)[4]) {
    // Matrices: keys of n (columns 0-7 of the step, then 8-15), then keys of n + 1.
    load_matrices(
        b, k_tile + ((n + lane / 16) * 8 + lane % 8) * kStride + step * 16 + (lane / 8) % 2 * 8);
  });
}

// The online softmax over one tile of scaled, masked scores (exp2 domain; masked keys -inf):
// updates the rows' running maxima and this lane's share of their sums, rescales `out`, and
// leaves exp2(score - max) in `scores`. A row may see none of a tile's keys (a window): its max
// stays -inf and softmax_base keeps the exponents finite.
template <int kKeyGroups, int kOutGroups>
__device__ __forceinline__ void softmax_tile(float (&scores)[kKeyGroups][4], float& max_low,
                                             float& max_high, float& sum_low, float& sum_high,
                                             float (&out)[kOutGroups][4]) {
  float tile_max_low = -INFINITY, tile_max_high = -INFINITY;
#pragma unroll
  for (int n = 0; n < kKeyGroups; ++n) {
    tile_max_low = fmaxf(tile_max_low, fmaxf(scores[n][0], scores[n][1]));
    tile_max_high = fmaxf(tile_max_high, fmaxf(scores[n][2], scores[n][3]));
  }
  tile_max_low = fmaxf(tile_max_low, GPU_SHFL_XOR(tile_max_low, 1));
  tile_max_low = fmaxf(tile_max_low, GPU_SHFL_XOR(tile_max_low, 2));
  tile_max_high = fmaxf(tile_max_high, GPU_SHFL_XOR(tile_max_high, 1));
  tile_max_high = fmaxf(tile_max_high, GPU_SHFL_XOR(tile_max_high, 2));
  const float new_max_low = softmax_base(fmaxf(max_low, tile_max_low));
  const float new_max_high = softmax_base(fmaxf(max_high, tile_max_high));
  const float correction_low = exp2f(max_low - new_max_low);  // 0 on the first tile
  const float correction_high = exp2f(max_high - new_max_high);
  max_low = fmaxf(max_low, tile_max_low);
  max_high = fmaxf(max_high, tile_max_high);
  float tile_sum_low = 0.0f, tile_sum_high = 0.0f;
#pragma unroll
  for (int n = 0; n < kKeyGroups; ++n) {
    scores[n][0] = exp2f(scores[n][0] - new_max_low);
    scores[n][1] = exp2f(scores[n][1] - new_max_low);
    scores[n][2] = exp2f(scores[n][2] - new_max_high);
    scores[n][3] = exp2f(scores[n][3] - new_max_high);
    tile_sum_low += scores[n][0] + scores[n][1];
    tile_sum_high += scores[n][2] + scores[n][3];
  }
  sum_low = sum_low * correction_low + tile_sum_low;
  sum_high = sum_high * correction_high + tile_sum_high;
#pragma unroll
  for (int n = 0; n < kOutGroups; ++n) {
    out[n][0] *= correction_low;
    out[n][1] *= correction_low;
    out[n][2] *= correction_high;
    out[n][3] *= correction_high;
  }
}

// P's A fragment for keys 16 step ... 16 step + 15: two adjacent S accumulators, rounded to T.
template <typename T, int kKeyGroups>
__device__ __forceinline__ void probability_fragments(const float (&scores)[kKeyGroups][4],
                                                      int step, uint32_t (&p)[4]) {
  p[0] = pack_pair<T>(scores[2 * step][0], scores[2 * step][1]);
  p[1] = pack_pair<T>(scores[2 * step][2], scores[2 * step][3]);
  p[2] = pack_pair<T>(scores[2 * step + 1][0], scores[2 * step + 1][1]);
  p[3] = pack_pair<T>(scores[2 * step + 1][2], scores[2 * step + 1][3]);
}

// out += P V over the tile's keys, 16 per step; value_fragments(step, n, b) gives the B fragments
// of output column groups n and n + 1.
template <typename T, int kKeyGroups, int kOutGroups, typename ValueFragments>
__device__ __forceinline__ void accumulate(const float (&scores)[kKeyGroups][4],
                                           float (&out)[kOutGroups][4],
                                           ValueFragments value_fragments) {
  static_assert(kOutGroups % 2 == 0);
#pragma unroll
  for (int step = 0; step < kKeyGroups / 2; ++step) {
    uint32_t p[4];
    probability_fragments<T>(scores, step, p);
#pragma unroll
    for (int n = 0; n < kOutGroups; n += 2) {
      uint32_t b[4];
      value_fragments(step, n, b);
      mma_16x8x16<T>(out[n], p, b[0], b[1]);
      mma_16x8x16<T>(out[n + 1], p, b[2], b[3]);
    }
  }
}

// accumulate over a V tile of T, its B fragments from ldmatrix.trans.
template <typename T, int kKeyGroups, int kOutGroups, int kStride>
__device__ __forceinline__ void accumulate_values(const float (&scores)[kKeyGroups][4],
                                                  const T* v_tile, int lane,
                                                  float (&out)[kOutGroups][4]) {
  accumulate<T>(scores, out, [&](int step, int n, uint32_t(&b)[4]) {
    // Matrices (transposed): keys 0-7 of the step for columns of n, keys 8-15, then n + 1.
    load_matrices_transposed(
        b, v_tile + (step * 16 + (lane / 8) % 2 * 8 + lane % 8) * kStride + (n + lane / 16) * 8);
  });
}

// The quad's four shares of a row's sum, added.
__device__ __forceinline__ float quad_sum(float value) {
  value += GPU_SHFL_XOR(value, 1);
  return value + GPU_SHFL_XOR(value, 2);
}

}  // namespace tessera::gpu::attention

#endif  // !TESSERA_GPU_HIP
