// fused_moe's grouped GEMMs on tensor cores (CUDA sm_80+, bf16 and f16; kernels/cuda/mma.cuh):
// a block takes 64 of one expert's pairs (a tile of the grouping, moe_grouping.cuh) and 64 weight
// rows, in 32-wide slices of K brought into shared memory by cp.async three slices ahead; its
// four warps each take 32 x 32 of the product with mma.m16n8k16 from ldmatrix fragments. The
// rows of x (gate_up) or of the activations (down) are gathered through the tile's pairs as they
// are copied; padding slots and rows past the edge copy zeros. Needs rows of whole 16-byte chunks
// (hidden and intermediate multiples of 8, 16-byte aligned tensors): the caller checks.
#pragma once

#if !defined(TESSERA_GPU_HIP)

#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/experts/moe_grouping.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/programmatic_launch.cuh"

namespace tessera::gpu::grouped_mma {

constexpr int kTile = 64;               // pairs and weight rows per block
constexpr int kSlice = 32;              // K per stage
constexpr int kStages = 3;              // slices in flight
constexpr int kThreads = 128;           // four warps, 2 x 2 over the tile
constexpr int kRowStride = kSlice + 8;  // padded: ldmatrix's eight rows fall in distinct banks
constexpr int kChunks = kSlice / 8;     // 16-byte chunks per row of a slice
constexpr int kCopiesPerThread = kTile * kChunks / kThreads;

template <typename T>
struct Stage {
  T a[kTile][kRowStride];  // the tile's pairs' rows of the input
  T b[kTile][kRowStride];  // its weight rows
};

// acc[m][n] (16 x 8 fragments, m over the warp's 32 pairs, n over its 32 weight rows) = the
// tile's product over `width` (a multiple of 8): a_row(r) and b_row(c) give row pointers, or null
// for a row of zeros.
template <typename T, typename ARow, typename BRow>
__device__ __forceinline__ void tile_product(int64_t width, ARow a_row, BRow b_row,
                                             float (&acc)[2][4][4]) {
  __shared__ __align__(16) Stage<T> stages[kStages];
  const int thread = static_cast<int>(threadIdx.x);
  const int lane = thread % 32, warp = thread / 32;
  const int warp_m = warp / 2, warp_n = warp % 2;
  // Copy i of this thread: row (thread + 128 i) / 4, chunk (thread + 128 i) % 4 of each slice.
  const T* a_rows[kCopiesPerThread];
  const T* b_rows[kCopiesPerThread];
#pragma unroll
  for (int i = 0; i < kCopiesPerThread; ++i) {
    a_rows[i] = a_row((thread + kThreads * i) / kChunks);
    b_rows[i] = b_row((thread + kThreads * i) / kChunks);
  }
  // Where a zero-filling copy points: slot 0 of a used tile always holds a pair, and a block's
  // first weight row always lies inside the weights.
  const T* const a_anywhere = a_row(0);
  const T* const b_anywhere = b_row(0);
  const int chunk = thread % kChunks;
  const int64_t slices = (width + kSlice - 1) / kSlice;
  const auto load = [&](int64_t slice) {
    Stage<T>& stage = stages[slice % kStages];
    const int64_t k = slice * kSlice + chunk * 8;
#pragma unroll
    for (int i = 0; i < kCopiesPerThread; ++i) {
      const int row = (thread + kThreads * i) / kChunks;
      const bool a_valid = a_rows[i] != nullptr && k < width;
      const bool b_valid = b_rows[i] != nullptr && k < width;
      copy_async_16(&stage.a[row][chunk * 8], a_valid ? a_rows[i] + k : a_anywhere, a_valid);
      copy_async_16(&stage.b[row][chunk * 8], b_valid ? b_rows[i] + k : b_anywhere, b_valid);
    }
  };
#pragma unroll
  for (int slice = 0; slice < kStages - 1; ++slice) {
    if (slice < slices) load(slice);
    copy_async_commit();
  }
  for (int64_t slice = 0; slice < slices; ++slice) {
    copy_async_wait<kStages - 2>();
    __syncthreads();  // the slice is in; every warp is done with the stage the next load reuses
    if (slice + kStages - 1 < slices) load(slice + kStages - 1);
    copy_async_commit();
    const Stage<T>& stage = stages[slice % kStages];
#pragma unroll
    for (int k16 = 0; k16 < kSlice; k16 += 16) {
      uint32_t a[2][4], b[2][4];
#pragma unroll
      for (int m = 0; m < 2; ++m)
        load_matrices(a[m], &stage.a[warp_m * 32 + m * 16 + lane % 8 + 8 * ((lane / 8) % 2)]
                                    [k16 + 8 * (lane / 16)]);
#pragma unroll
      for (int n = 0; n < 2; ++n)
        load_matrices(b[n], &stage.b[warp_n * 32 + n * 16 + lane % 8 + 8 * (lane / 16)]
                                    [k16 + 8 * ((lane / 8) % 2)]);
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < 4; ++n)
          mma_16x8x16<T>(acc[m][n], a[m], b[n / 2][2 * (n % 2)], b[n / 2][2 * (n % 2) + 1]);
    }
  }
  copy_async_wait<0>();
}

// Where output fragment element (m, n, e) of this thread lies in the tile: pair row and weight row.
__device__ __forceinline__ int fragment_row(int m, int e) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  return (warp / 2) * 32 + m * 16 + lane / 4 + 8 * (e / 2);
}
__device__ __forceinline__ int fragment_column(int n, int e) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  return (warp % 2) * 32 + n * 8 + 2 * (lane % 4) + e % 2;
}

// Block (b, tile) takes intermediate columns [32 b, 32 b + 32). Its weight rows are ordered so
// that a warp's fragments n and n + 2 hold gate and up of the same columns: tile rows [32 w,
// 32 w + 16) are the gate rows of columns 32 b + 16 w + [0, 16), the next 16 their up rows.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    gate_up_kernel(const T* x, const T* gate_up, Grouping grouping, T* activations) {
  __shared__ int pairs[kTile];
  const int64_t tile = blockIdx.y;
  const int expert = tile_expert(grouping);
  if (expert < 0) return;
  const int64_t hidden = grouping.hidden, intermediate = grouping.intermediate;
  if (threadIdx.x < kTile) pairs[threadIdx.x] = grouping.sorted_pairs[tile * kTile + threadIdx.x];
  __syncthreads();
  const int64_t column0 = static_cast<int64_t>(blockIdx.x) * (kTile / 2);
  const T* weights = gate_up + expert * 2 * intermediate * hidden;
  // The intermediate column of tile row c (an up row when c % 32 >= 16).
  const auto column_of = [&](int c) { return column0 + (c / 32) * 16 + c % 16; };
  float acc[2][4][4] = {};
  tile_product<T>(
      hidden,
      [&](int r) -> const T* {
        return pairs[r] < 0 ? nullptr
                            : x + static_cast<int64_t>(pairs[r] / grouping.top_k) * hidden;
      },
      [&](int c) -> const T* {
        const int64_t column = column_of(c);
        if (column >= intermediate) return nullptr;
        return weights + ((c % 32) < 16 ? column : intermediate + column) * hidden;
      },
      acc);
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int pair = pairs[fragment_row(m, e)];
        const int64_t column = column_of(fragment_column(n, e));
        if (pair >= 0 && column < intermediate)
          activations[static_cast<int64_t>(pair) * intermediate + column] =
              from_compute<T>(moe_activation<T>(acc[m][n][e], acc[m][n + 2][e]));
      }
}

// Block (b, tile) takes hidden rows [64 b, 64 b + 64) of the tile's expert's down weights.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    down_kernel(const T* activations, const T* down, Grouping grouping, float* expert_out) {
  __shared__ int pairs[kTile];
  const int64_t tile = blockIdx.y;
  const int expert = tile_expert(grouping);
  if (expert < 0) return;
  const int64_t hidden = grouping.hidden, intermediate = grouping.intermediate;
  if (threadIdx.x < kTile) pairs[threadIdx.x] = grouping.sorted_pairs[tile * kTile + threadIdx.x];
  __syncthreads();
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const T* weights = down + expert * hidden * intermediate;
  float acc[2][4][4] = {};
  tile_product<T>(
      intermediate,
      [&](int r) -> const T* {
        return pairs[r] < 0 ? nullptr : activations + static_cast<int64_t>(pairs[r]) * intermediate;
      },
      [&](int c) -> const T* {
        return row0 + c < hidden ? weights + (row0 + c) * intermediate : nullptr;
      },
      acc);
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int pair = pairs[fragment_row(m, e)];
        const int64_t row = row0 + fragment_column(n, e);
        if (pair >= 0 && row < hidden)
          expert_out[static_cast<int64_t>(pair) * hidden + row] = acc[m][n][e];
      }
}

}  // namespace tessera::gpu::grouped_mma

#endif  // !TESSERA_GPU_HIP
