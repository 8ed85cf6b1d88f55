// What fused_moe's grouped GEMMs share (kernels/cuda/experts/fused_moe.cu and the tensor-core
// ones of grouped_mma.cuh): the grouping of the (token, expert) pairs into tiles of one expert,
// and the activation between the two projections.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/pointwise_table.h"

namespace tessera::gpu {

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

// silu(gate) * up, rounded to T as silu_and_mul's output is, before the down projection reads it.
template <typename T>
__device__ __forceinline__ float moe_activation(float gate, float up) {
  return to_compute(from_compute<T>(scalar::tsr_silu(gate) * up));
}

}  // namespace tessera::gpu
