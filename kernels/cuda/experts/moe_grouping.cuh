// What fused_moe's grouped GEMMs share (kernels/cuda/experts/fused_moe.cu and the tensor-core
// ones of grouped_mma.cuh): the grouping of the (token, expert) pairs into tiles of one expert,
// and the activation between the two projections.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/pointwise_table.h"

namespace tessera::gpu {

// The skinny grouped GEMMs (a warp per weight row): threads per block and pairs per tile.
constexpr int kSkinnyThreads = 256;
constexpr int kSkinnyPairs = 8;

// The pairs sorted by expert into tiles of `tile rows` (pair p is token p / top_k's k-th choice).
struct Grouping {
  const int32_t* sorted_pairs;  // [tiles * tile rows], -1 in padding slots
  const int32_t* tile_experts;  // [tiles], -1 past the last used tile
  int top_k;
  int64_t hidden, intermediate;
};

// The expert of the block's tile (blockIdx.y), or -1 when the tile is past the last used one and
// the block has nothing to do; after the grids that wrote the grouping have finished.
__device__ __forceinline__ int tile_expert(const Grouping& grouping) {
  wait_for_prior_grids();
  allow_next_grid();
  return grouping.tile_experts[blockIdx.y];
}

// A skinny warp's share of its block's tile (blockIdx.y): weight row `row` (b * warps + w for
// warp w of block b) of the tile's expert, against the tile's pairs (-1 in padding slots).
struct SkinnyWarp {
  int lane;
  int64_t row;
  int expert;
  int pairs[kSkinnyPairs];
};

// Fills `warp`; false when it has nothing to do (a tile past the last used one, or a row past
// `rows`). After the grids that wrote the grouping have finished.
__device__ __forceinline__ bool find_skinny_warp(const Grouping& grouping, int64_t rows,
                                                 SkinnyWarp& warp) {
  constexpr int kWarps = kSkinnyThreads / GPU_WARP_SIZE;
  warp.lane = static_cast<int>(threadIdx.x) % GPU_WARP_SIZE;
  warp.row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / GPU_WARP_SIZE;
  warp.expert = tile_expert(grouping);
  if (warp.expert < 0 || warp.row >= rows) return false;
  const int64_t tile = blockIdx.y;
#pragma unroll
  for (int r = 0; r < kSkinnyPairs; ++r)
    warp.pairs[r] = grouping.sorted_pairs[tile * kSkinnyPairs + r];
  return true;
}

// Each pair's token row of x [T, hidden] (pair p is token p / top_k's).
template <typename T>
__device__ __forceinline__ void pair_token_rows(const T* x, const SkinnyWarp& warp,
                                                const Grouping& grouping,
                                                const T* (&rows)[kSkinnyPairs]) {
#pragma unroll
  for (int r = 0; r < kSkinnyPairs; ++r)
    rows[r] = x + static_cast<int64_t>(warp.pairs[r] / grouping.top_k) * grouping.hidden;
}

// The end of a skinny down warp: each pair's sum over the warp, written by lane 0 at hidden row
// `row` of the pair's f32 expert output.
__device__ __forceinline__ void store_skinny_outputs(const int (&pairs)[kSkinnyPairs],
                                                     const float (&sum)[kSkinnyPairs], int lane,
                                                     int64_t row, int64_t hidden,
                                                     float* expert_out) {
#pragma unroll
  for (int r = 0; r < kSkinnyPairs; ++r) {
    if (pairs[r] < 0) continue;  // the same on every lane: no divergence
    const float total = group_reduce<FloatSum, GPU_WARP_SIZE>(sum[r]);
    if (lane == 0) expert_out[pairs[r] * hidden + row] = total;
  }
}

// silu(gate) * up, rounded to T as silu_and_mul's output is, before the down projection reads it.
template <typename T>
__device__ __forceinline__ float moe_activation(float gate, float up) {
  return to_compute(from_compute<T>(scalar::tsr_silu(gate) * up));
}

// The end of a skinny gate_up warp: each pair's gate and up sums over the warp, and lane 0 writes
// the pair's activation of intermediate column `column`.
template <typename T>
__device__ __forceinline__ void store_skinny_activations(const int (&pairs)[kSkinnyPairs],
                                                         const float (&gate)[kSkinnyPairs],
                                                         const float (&up)[kSkinnyPairs], int lane,
                                                         int64_t column, int64_t intermediate,
                                                         T* activations) {
#pragma unroll
  for (int r = 0; r < kSkinnyPairs; ++r) {
    if (pairs[r] < 0) continue;
    const float gate_sum = group_reduce<FloatSum, GPU_WARP_SIZE>(gate[r]);
    const float up_sum = group_reduce<FloatSum, GPU_WARP_SIZE>(up[r]);
    if (lane == 0)
      activations[pairs[r] * intermediate + column] =
          from_compute<T>(moe_activation<T>(gate_sum, up_sum));
  }
}

}  // namespace tessera::gpu
