// GPU kernels of moe_routing and fused_moe (compile/ops/custom/fused_moe.cpp), with the CPU
// kernels' semantics (kernels/cpu/fused_moe.cpp): routing in f32 (softmax over every expert, the
// top_k by repeated scans, the lowest index first among equals, renormalized when asked), each
// chosen expert's gate/up and down projections in f32 with the activation rounded to T between
// them, and the weighted sum over a token's experts rounded once.
//
// Everything stays on the device (no host round trip, so a decode step stays inside its CUDA
// graph), in five launches:
//   1. route (moe_routing.cu): a warp per token writes its top_k expert ids and weights;
//   2. group: one block counts the (token, expert) pairs per local expert, gives each expert
//      ceil(count / tile rows) tiles, and writes the pairs sorted by expert into those tiles
//      (padding slots -1) and each tile's expert (-1 past the last tile);
//   3. gate_up: per (tile, columns) the tile's pairs times its expert's gate and up rows, the
//      activation silu(gate) * up rounded to T;
//   4. down: per (tile, rows) the activations times the expert's down rows, f32 per pair;
//   5. combine: each token's pairs weighted and summed in k order (deterministic), rounded once.
// Each expert's weights are read once per tile of its pairs, and experts without pairs not at
// all. Three grouped GEMMs share that grouping: `skinny` (a warp per weight row, up to 8 pairs per
// tile: decode), `tiled` (64 x 64 tiles through shared memory: prefill) and tensor cores
// (grouped_mma.cuh, CUDA only). Experts in a GGUF block format take the skinny kernels of
// quantized_experts.cuh, or are dequantized into x's dtype for the tiles. The launch grids are
// sized by the most tiles any routing can need, so their sizes never depend on the routing.
#include "kernels/cuda/experts/fused_moe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/experts/grouped_mma.cuh"
#include "kernels/cuda/experts/moe_grouping.cuh"
#include "kernels/cuda/experts/moe_routing.h"
#include "kernels/cuda/experts/quantized_experts.cuh"
#include "kernels/cuda/gemm/fma_tile.cuh"
#include "kernels/cuda/gemm/kept_scratch.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/programmatic_launch.cuh"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

constexpr int kCombineThreads = 128;
constexpr int kGroupThreads = 1024;  // one block; also the most local experts it can group
constexpr int kUnroll = 2;           // steps of a skinny warp's row loaded at once
// The automatic choice: skinny up to this many pairs per local expert on average (quantized
// experts: before the tiles, which dequantize every expert with pairs first).
constexpr int64_t kSkinnyPairsPerExpertBeforeTensorCores = 1;
constexpr int64_t kSkinnyPairsPerExpertBeforeTiled = 8;
constexpr int64_t kSkinnyPairsPerQuantizedExpert = 4;
constexpr int kTile = 64;  // pairs and weight rows per tiled tile
constexpr int kTileK = 16;
constexpr int kTiledThreads = 256;  // 16 x 16 threads, each 4 x 4 outputs strided by 16
constexpr int kThreadsPerSide = 16;
constexpr int kOutputsPerSide = kTile / kThreadsPerSide;
constexpr int64_t kMaxGridY = 65535;

// ---- 2. Grouping the pairs by expert.

// The most tiles of `tile_rows` pairs any routing of `pairs` pairs over `local` experts needs:
// each expert's last tile may be partly empty.
int64_t most_tiles(int64_t pairs, int64_t local, int tile_rows) {
  return ceil_div(pairs, tile_rows) + std::min(local, pairs);
}

// One block of kGroupThreads threads; thread e < local owns expert first + e, and writes its count
// of pairs to expert_pairs[e].
__global__ void __launch_bounds__(kGroupThreads)
    group_kernel(const int32_t* ids, int64_t pairs, int64_t first, int64_t local, int tile_rows,
                 int64_t tiles, int32_t* sorted_pairs, int32_t* tile_experts,
                 int32_t* expert_pairs) {
  __shared__ int counts[kGroupThreads];
  __shared__ int first_tiles[kGroupThreads];
  __shared__ int scan[kGroupThreads];
  wait_for_prior_grids();
  allow_next_grid();
  const int thread = static_cast<int>(threadIdx.x);
  counts[thread] = 0;
  for (int64_t slot = thread; slot < tiles * tile_rows; slot += kGroupThreads)
    sorted_pairs[slot] = -1;
  for (int64_t tile = thread; tile < tiles; tile += kGroupThreads) tile_experts[tile] = -1;
  __syncthreads();
  for (int64_t pair = thread; pair < pairs; pair += kGroupThreads) {
    const int64_t expert = ids[pair] - first;
    if (expert >= 0 && expert < local) atomicAdd(&counts[expert], 1);
  }
  __syncthreads();
  if (thread < local) expert_pairs[thread] = counts[thread];
  // Each expert's first tile: an exclusive prefix sum of the tiles over the block.
  const int own_tiles = thread < local ? (counts[thread] + tile_rows - 1) / tile_rows : 0;
  scan[thread] = own_tiles;
  __syncthreads();
  for (int offset = 1; offset < kGroupThreads; offset *= 2) {
    const int earlier = thread >= offset ? scan[thread - offset] : 0;
    __syncthreads();
    scan[thread] += earlier;
    __syncthreads();
  }
  first_tiles[thread] = scan[thread] - own_tiles;
  counts[thread] = 0;  // now each expert's next free slot
  for (int i = 0; i < own_tiles; ++i) tile_experts[first_tiles[thread] + i] = thread;
  __syncthreads();
  // The order within an expert's tiles varies from run to run; no result depends on it (each
  // pair's products are its own, and combine sums in k order).
  for (int64_t pair = thread; pair < pairs; pair += kGroupThreads) {
    const int64_t expert = ids[pair] - first;
    if (expert < 0 || expert >= local) continue;
    const int slot = atomicAdd(&counts[expert], 1);
    sorted_pairs[static_cast<int64_t>(first_tiles[expert]) * tile_rows + slot] =
        static_cast<int32_t>(pair);
  }
}

// ---- 3 and 4, skinny: a warp per weight row, E elements per load (a 16-byte pack, or 1).

// Warp w of block b takes intermediate column j = b * warps + w of tile blockIdx.y: rows j (gate)
// and I + j (up) of its expert, dotted with each pair's token row of x.
template <typename T, int E>
__global__ void __launch_bounds__(kSkinnyThreads)
    gate_up_skinny_kernel(const T* x, const T* gate_up, Grouping grouping, T* activations) {
  SkinnyWarp warp;
  if (!find_skinny_warp(grouping, grouping.intermediate, warp)) return;
  const int64_t hidden = grouping.hidden, intermediate = grouping.intermediate;
  const int(&pairs)[kSkinnyPairs] = warp.pairs;
  const T* inputs[kSkinnyPairs];
  pair_token_rows(x, warp, grouping, inputs);
  const T* gate_row = gate_up + (warp.expert * 2 * intermediate + warp.row) * hidden;
  const T* up_row = gate_row + intermediate * hidden;
  float gate[kSkinnyPairs] = {}, up[kSkinnyPairs] = {};
  constexpr int64_t kStep = static_cast<int64_t>(GPU_WARP_SIZE) * E;
  for (int64_t start = static_cast<int64_t>(warp.lane) * E; start < hidden;
       start += kStep * kUnroll) {
    // kUnroll steps' weights requested before any is used, to keep more loads in flight.
    Pack<T, E> gate_packs[kUnroll], up_packs[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (start + u * kStep < hidden) {
        gate_packs[u] = load_pack<E>(gate_row + start + u * kStep);
        up_packs[u] = load_pack<E>(up_row + start + u * kStep);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (start + u * kStep >= hidden) break;
#pragma unroll
      for (int r = 0; r < kSkinnyPairs; ++r) {
        if (pairs[r] < 0) continue;  // the same on every lane: no divergence
        const Pack<T, E> input = load_pack<E>(inputs[r] + start + u * kStep);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const float value = to_compute(input.values[e]);
          gate[r] = fmaf(to_compute(gate_packs[u].values[e]), value, gate[r]);
          up[r] = fmaf(to_compute(up_packs[u].values[e]), value, up[r]);
        }
      }
    }
  }
  store_skinny_activations(pairs, gate, up, warp.lane, warp.row, intermediate, activations);
}

// Warp w of block b takes hidden row h = b * warps + w of tile blockIdx.y's expert's down weights,
// dotted with each pair's activations.
template <typename T, int E>
__global__ void __launch_bounds__(kSkinnyThreads)
    down_skinny_kernel(const T* activations, const T* down, Grouping grouping, float* expert_out) {
  SkinnyWarp warp;
  if (!find_skinny_warp(grouping, grouping.hidden, warp)) return;
  const int64_t hidden = grouping.hidden, intermediate = grouping.intermediate;
  const int(&pairs)[kSkinnyPairs] = warp.pairs;
  const T* weight_row = down + (warp.expert * hidden + warp.row) * intermediate;
  float sum[kSkinnyPairs] = {};
  constexpr int64_t kStep = static_cast<int64_t>(GPU_WARP_SIZE) * E;
  for (int64_t start = static_cast<int64_t>(warp.lane) * E; start < intermediate;
       start += kStep * kUnroll) {
    Pack<T, E> weights[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (start + u * kStep < intermediate)
        weights[u] = load_pack<E>(weight_row + start + u * kStep);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (start + u * kStep >= intermediate) break;
#pragma unroll
      for (int r = 0; r < kSkinnyPairs; ++r) {
        if (pairs[r] < 0) continue;
        const Pack<T, E> input =
            load_pack<E>(activations + pairs[r] * intermediate + start + u * kStep);
#pragma unroll
        for (int e = 0; e < E; ++e)
          sum[r] = fmaf(to_compute(weights[u].values[e]), to_compute(input.values[e]), sum[r]);
      }
    }
  }
  store_skinny_outputs(pairs, sum, warp.lane, warp.row, hidden, expert_out);
}

// ---- 3 and 4, tiled: 64 pairs x 64 weight rows per block, 16-wide slices of K in shared memory.

// The block's product over K: rows of `a` are tile pairs (a_row(r) gives the row's pointer, or
// null for a padding slot), rows of `b` are weight rows (b_row(c) likewise, null past the edge).
// acc[i][j] holds pair row ty + 16 i and weight row tx + 16 j.
template <typename T, typename ARow, typename BRow>
__device__ __forceinline__ void tile_product(int64_t width, ARow a_row, BRow b_row,
                                             float (&acc)[kOutputsPerSide][kOutputsPerSide]) {
  __shared__ float a_tile[kTileK][kTile];
  __shared__ float b_tile[kTileK][kTile];
  constexpr int kLoads = kTile * kTileK / kTiledThreads;  // elements per thread per slice
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerSide;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerSide;
  // Element threadIdx.x + 256 l of a slice is row (threadIdx.x + 256 l) / 16, column threadIdx.x %
  // 16: the same rows for every slice, so their pointers are found once.
  const int column = static_cast<int>(threadIdx.x) % kTileK;
  const T* a_rows[kLoads];
  const T* b_rows[kLoads];
#pragma unroll
  for (int l = 0; l < kLoads; ++l) {
    a_rows[l] = a_row((static_cast<int>(threadIdx.x) + kTiledThreads * l) / kTileK);
    b_rows[l] = b_row((static_cast<int>(threadIdx.x) + kTiledThreads * l) / kTileK);
  }
  for (int64_t k0 = 0; k0 < width; k0 += kTileK) {
    // Consecutive threads read consecutive addresses along K; past the edges the tiles hold
    // zeros, which add nothing.
    const int64_t kk = k0 + column;
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int r = (static_cast<int>(threadIdx.x) + kTiledThreads * l) / kTileK;
      a_tile[column][r] = a_rows[l] != nullptr && kk < width ? to_compute(a_rows[l][kk]) : 0.0f;
      b_tile[column][r] = b_rows[l] != nullptr && kk < width ? to_compute(b_rows[l][kk]) : 0.0f;
    }
    __syncthreads();
    accumulate_fma_slice<kTileK, kTile, kThreadsPerSide>(a_tile, b_tile, tx, ty, acc);
    __syncthreads();  // the tiles are read; the next slice may overwrite them
  }
}

// Block (b, tile) takes intermediate columns [32 b, 32 b + 32): its 64 weight rows are those
// columns' gate rows, then their up rows, so that a thread holds gate and up of the same column
// (weight rows tx, tx + 16 and tx + 32, tx + 48).
template <typename T>
__global__ void __launch_bounds__(kTiledThreads)
    gate_up_tiled_kernel(const T* x, const T* gate_up, Grouping grouping, T* activations) {
  constexpr int kColumns = kTile / 2;
  const int64_t tile = blockIdx.y;
  const int expert = tile_expert(grouping);
  if (expert < 0) return;
  const int64_t hidden = grouping.hidden, intermediate = grouping.intermediate;
  const int32_t* pairs = grouping.sorted_pairs + tile * kTile;
  const int64_t column0 = static_cast<int64_t>(blockIdx.x) * kColumns;
  const T* weights = gate_up + expert * 2 * intermediate * hidden;
  float acc[kOutputsPerSide][kOutputsPerSide] = {};
  tile_product<T>(
      hidden,
      [&](int r) -> const T* {
        return pairs[r] < 0 ? nullptr : x + pairs[r] / grouping.top_k * hidden;
      },
      [&](int c) -> const T* {
        const int64_t column = column0 + c % kColumns;
        if (column >= intermediate) return nullptr;
        return weights + (c < kColumns ? column : intermediate + column) * hidden;
      },
      acc);
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerSide;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerSide;
#pragma unroll
  for (int i = 0; i < kOutputsPerSide; ++i) {
    const int pair = pairs[ty + kThreadsPerSide * i];
    if (pair < 0) continue;
#pragma unroll
    for (int j = 0; j < kOutputsPerSide / 2; ++j) {
      const int64_t column = column0 + tx + kThreadsPerSide * j;
      if (column < intermediate)
        activations[pair * intermediate + column] =
            from_compute<T>(moe_activation<T>(acc[i][j], acc[i][j + kOutputsPerSide / 2]));
    }
  }
}

// Block (b, tile) takes hidden rows [64 b, 64 b + 64) of the tile's expert's down weights.
template <typename T>
__global__ void __launch_bounds__(kTiledThreads)
    down_tiled_kernel(const T* activations, const T* down, Grouping grouping, float* expert_out) {
  const int64_t tile = blockIdx.y;
  const int expert = tile_expert(grouping);
  if (expert < 0) return;
  const int64_t hidden = grouping.hidden, intermediate = grouping.intermediate;
  const int32_t* pairs = grouping.sorted_pairs + tile * kTile;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const T* weights = down + expert * hidden * intermediate;
  float acc[kOutputsPerSide][kOutputsPerSide] = {};
  tile_product<T>(
      intermediate,
      [&](int r) -> const T* {
        return pairs[r] < 0 ? nullptr : activations + pairs[r] * intermediate;
      },
      [&](int c) -> const T* {
        return row0 + c < hidden ? weights + (row0 + c) * intermediate : nullptr;
      },
      acc);
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerSide;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerSide;
#pragma unroll
  for (int i = 0; i < kOutputsPerSide; ++i) {
    const int pair = pairs[ty + kThreadsPerSide * i];
    if (pair < 0) continue;
#pragma unroll
    for (int j = 0; j < kOutputsPerSide; ++j) {
      const int64_t row = row0 + tx + kThreadsPerSide * j;
      if (row < hidden) expert_out[pair * hidden + row] = acc[i][j];
    }
  }
}

// ---- 5. Combine: out[token, h] = sum over the token's local experts of weight * expert_out.
template <typename T>
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(const float* expert_out, const int32_t* ids, const float* weights, int top_k,
                   int64_t first, int64_t local, int64_t tokens, int64_t hidden, T* out) {
  wait_for_prior_grids();
  allow_next_grid();
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       index < tokens * hidden; index += step) {
    const int64_t token = index / hidden, h = index % hidden;
    float sum = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      const int64_t pair = token * top_k + k;
      const int64_t expert = ids[pair] - first;
      if (expert >= 0 && expert < local) sum += weights[pair] * expert_out[pair * hidden + h];
    }
    out[index] = from_compute<T>(sum);
  }
}

// ---- Host side.

// Weights as fused_moe's kernels read them: float rows of T, or a quantized format's bytes.
struct ExpertStack {
  const void* data;
  DType dtype;
  int64_t values;  // per expert
};

// The grouped GEMMs over the tiles of `grouping`: gate_up into the activations, then down into
// the f32 expert outputs.
template <typename T>
void launch_grouped_gemms(MoeKernel kernel, const T* x, ExpertStack gate_up, ExpertStack down,
                          const Grouping& grouping, unsigned int tiles, const int32_t* expert_pairs,
                          int64_t local, T* dequantized, T* activations, float* expert_out,
                          gpuStream_t stream, int device) {
  const int64_t hidden = grouping.hidden, intermediate = grouping.intermediate;
  if (kernel == MoeKernel::skinny) {
    constexpr int V = kPackElements<T>;
    constexpr int kWarps = kSkinnyThreads / GPU_WARP_SIZE;
    const dim3 gate_up_grid(grid_size(intermediate, kWarps), tiles);
    const dim3 down_grid(grid_size(hidden, kWarps), tiles);
    // Packs need every row to start on a pack: x, the weights and the activations.
    const bool packed = hidden % V == 0 && intermediate % V == 0 && pack_aligned<T, V>(x) &&
                        (is_quantized(gate_up.dtype) || pack_aligned<T, V>(gate_up.data)) &&
                        (is_quantized(down.dtype) || pack_aligned<T, V>(down.data));
    const auto* gate_up_weights = static_cast<const T*>(gate_up.data);
    const auto* down_weights = static_cast<const T*>(down.data);
    if (is_quantized(gate_up.dtype)) {
      visit_quantized_dtype(gate_up.dtype, [&]<DType D>() {
        launch_programmatic(gate_up_quantized_skinny_kernel<T, D>, gate_up_grid,
                            dim3(kSkinnyThreads), 0, stream, device, x,
                            static_cast<const uint8_t*>(gate_up.data), grouping, activations);
      });
    } else if (packed) {
      launch_programmatic(gate_up_skinny_kernel<T, V>, gate_up_grid, dim3(kSkinnyThreads), 0,
                          stream, device, x, gate_up_weights, grouping, activations);
    } else {
      launch_programmatic(gate_up_skinny_kernel<T, 1>, gate_up_grid, dim3(kSkinnyThreads), 0,
                          stream, device, x, gate_up_weights, grouping, activations);
    }
    const auto* activation_rows = static_cast<const T*>(activations);
    if (is_quantized(down.dtype)) {
      visit_quantized_dtype(down.dtype, [&]<DType D>() {
        launch_programmatic(down_quantized_skinny_kernel<T, D>, down_grid, dim3(kSkinnyThreads), 0,
                            stream, device, activation_rows, static_cast<const uint8_t*>(down.data),
                            grouping, expert_out);
      });
    } else if (packed) {
      launch_programmatic(down_skinny_kernel<T, V>, down_grid, dim3(kSkinnyThreads), 0, stream,
                          device, activation_rows, down_weights, grouping, expert_out);
    } else {
      launch_programmatic(down_skinny_kernel<T, 1>, down_grid, dim3(kSkinnyThreads), 0, stream,
                          device, activation_rows, down_weights, grouping, expert_out);
    }
    return;
  }
  // The tiles read float rows: quantized experts that received pairs are dequantized to T first,
  // into `dequantized` (gate_up's when quantized, then down's when quantized).
  auto float_rows = [&](const ExpertStack& stack, T* target) -> const T* {
    if (!is_quantized(stack.dtype)) return static_cast<const T*>(stack.data);
    visit_quantized_dtype(stack.dtype, [&]<DType D>() {
      // A warp's lanes take a chunk each: a block's threads take as many chunks at once.
      const int64_t chunks = stack.values / kQuantizedChunk;
      launch_programmatic(dequantize_experts_kernel<T, D>,
                          dim3(static_cast<unsigned int>(std::min<int64_t>(
                                   grid_size(chunks, kDequantizeThreads), kMaxGridY)),
                               static_cast<unsigned int>(local)),
                          dim3(kDequantizeThreads), 0, stream, device,
                          static_cast<const uint8_t*>(stack.data), stack.values, expert_pairs,
                          target);
    });
    return target;
  };
  const T* gate_up_rows = float_rows(gate_up, dequantized);
  const T* down_rows =
      float_rows(down, dequantized + (is_quantized(gate_up.dtype) ? local * gate_up.values : 0));
  if (kernel == MoeKernel::tensor_cores) {
#if !defined(TESSERA_GPU_HIP)
    static_assert(grouped_mma::kTile == kTile, "the grouping's tiles are the kernels' tiles");
    if constexpr (!std::is_same_v<T, float>) {
      launch_programmatic(grouped_mma::gate_up_kernel<T>,
                          dim3(grid_size(intermediate, grouped_mma::kTile / 2), tiles),
                          dim3(grouped_mma::kThreads), 0, stream, device, x, gate_up_rows, grouping,
                          activations);
      launch_programmatic(grouped_mma::down_kernel<T>,
                          dim3(grid_size(hidden, grouped_mma::kTile), tiles),
                          dim3(grouped_mma::kThreads), 0, stream, device,
                          static_cast<const T*>(activations), down_rows, grouping, expert_out);
    }
#endif
    return;
  }
  launch_programmatic(gate_up_tiled_kernel<T>, dim3(grid_size(intermediate, kTile / 2), tiles),
                      dim3(kTiledThreads), 0, stream, device, x, gate_up_rows, grouping,
                      activations);
  launch_programmatic(down_tiled_kernel<T>, dim3(grid_size(hidden, kTile), tiles),
                      dim3(kTiledThreads), 0, stream, device, static_cast<const T*>(activations),
                      down_rows, grouping, expert_out);
}

template <typename T>
void launch_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                    const Routes& routes, int64_t tokens, int64_t top_k, int64_t first,
                    int64_t local, MoeKernel kernel, T* out, gpuStream_t stream) {
  const char* op = "fused_moe";
  const int device = x.device().index;
  const int64_t hidden = x.size(1), intermediate = gate_up.size(1) / 2, pairs = tokens * top_k;
  const int tile_rows = kernel == MoeKernel::skinny ? kSkinnyPairs : kTile;
  const int64_t tiles = most_tiles(pairs, local, tile_rows);
  TESSERA_REQUIRE(tiles <= kMaxGridY,
                  "{}: {} tokens of {} experts each need {} tiles, more than the {} one launch "
                  "takes; use smaller steps (engine.max_num_batched_tokens)",
                  op, tokens, top_k, tiles, kMaxGridY);
  ScratchLayout layout;
  const int64_t sorted_at = layout.add<int32_t>(tiles * tile_rows);
  const int64_t tile_experts_at = layout.add<int32_t>(tiles);
  const int64_t expert_pairs_at = layout.add<int32_t>(local);
  const int64_t activations_at = layout.add<T>(pairs * intermediate);
  const int64_t expert_out_at = layout.add<float>(pairs * hidden);
  auto* scratch = static_cast<char*>(
      kept_scratch(x.device(), stream, layout.bytes(), "moe grouping and intermediates"));
  auto* sorted_pairs = reinterpret_cast<int32_t*>(scratch + sorted_at);
  auto* tile_experts = reinterpret_cast<int32_t*>(scratch + tile_experts_at);
  auto* expert_pairs = reinterpret_cast<int32_t*>(scratch + expert_pairs_at);
  auto* activations = reinterpret_cast<T*>(scratch + activations_at);
  auto* expert_out = reinterpret_cast<float*>(scratch + expert_out_at);
  launch_programmatic(group_kernel, dim3(1), dim3(kGroupThreads), 0, stream, device,
                      static_cast<const int32_t*>(routes.ids), pairs, first, local, tile_rows,
                      tiles, sorted_pairs, tile_experts, expert_pairs);
  const Grouping grouping{sorted_pairs, tile_experts, static_cast<int>(top_k), hidden,
                          intermediate};
  // Quantized experts for the tiles, in x's dtype: scratch kept for the process, sized by the
  // experts held, not by the step (the startup profile's largest step allocates it).
  T* dequantized = nullptr;
  const int64_t dequantized_values =
      local * intermediate * hidden *
      ((is_quantized(gate_up.dtype()) ? 2 : 0) + (is_quantized(down.dtype()) ? 1 : 0));
  if (kernel != MoeKernel::skinny && dequantized_values > 0)
    dequantized = static_cast<T*>(kept_scratch(x.device(), stream,
                                               dequantized_values * static_cast<int64_t>(sizeof(T)),
                                               "moe dequantized experts"));
  launch_grouped_gemms<T>(kernel, static_cast<const T*>(x.data_ptr()),
                          {gate_up.data_ptr(), gate_up.dtype(), 2 * intermediate * hidden},
                          {down.data_ptr(), down.dtype(), hidden * intermediate}, grouping,
                          static_cast<unsigned int>(tiles), expert_pairs, local, dequantized,
                          activations, expert_out, stream, device);
  launch_programmatic(
      combine_kernel<T>, dim3(grid_size(tokens * hidden, kCombineThreads)), dim3(kCombineThreads),
      0, stream, device, static_cast<const float*>(expert_out),
      static_cast<const int32_t*>(routes.ids), static_cast<const float*>(routes.weights),
      static_cast<int>(top_k), first, local, tokens, hidden, out);
  GPU_CHECK_LAUNCH(op);
}

void fused_moe_gpu(const KernelArgs& args) {
  run_fused_moe(args.inputs[0], args.inputs[1], args.inputs[2], args.inputs[3], args.outputs[0],
                args.attributes.get_int("top_k"), args.attributes.get_bool("renormalize", false),
                args.attributes.get_int("first_expert", 0));
}

TESSERA_REGISTER_KERNEL("fused_moe", kGpuDeviceType, fused_moe_gpu);

}  // namespace

bool fused_moe_fits_tensor_cores(const Tensor& x, const Tensor& gate_up, const Tensor& down) {
#if defined(TESSERA_GPU_HIP)
  (void)x, (void)gate_up, (void)down;
  return false;
#else
  // Quantized weights reach the tensor cores dequantized into aligned scratch.
  const auto aligned = [](const Tensor& tensor) {
    return is_quantized(tensor.dtype()) || reinterpret_cast<uintptr_t>(tensor.data_ptr()) % 16 == 0;
  };
  return (x.dtype() == DType::bf16 || x.dtype() == DType::f16) && x.dim() == 2 &&
         gate_up.dim() == 3 && x.size(1) > 0 && gate_up.size(1) > 0 && x.size(1) % 8 == 0 &&
         gate_up.size(1) % 16 == 0 && aligned(x) && aligned(gate_up) && aligned(down) &&
         device_limits(x.device().index).compute_major >= 8;
#endif
}

void run_fused_moe(const Tensor& x, const Tensor& router_logits, const Tensor& gate_up,
                   const Tensor& down, const Tensor& out, int64_t top_k, bool renormalize,
                   int64_t first_expert, MoeKernel kernel) {
  const char* op = "fused_moe";
  for (const Tensor* tensor : {&x, &router_logits, &gate_up, &down, &out})
    TESSERA_REQUIRE(tensor->is_contiguous() && tensor->device() == x.device(),
                    "{}: {} must be contiguous on {}", op, tensor->str(), x.device().str());
  TESSERA_REQUIRE(x.dim() == 2 && gate_up.dim() == 3 && down.dim() == 3,
                  "{}: x {}, gate_up_weights {} and down_weights {} must be [T, H], [E, 2I, H] "
                  "and [E, H, I]",
                  op, x.str(), gate_up.str(), down.str());
  const int64_t tokens = x.size(0), hidden = x.size(1), local = gate_up.size(0);
  const int64_t intermediate = gate_up.size(1) / 2;
  TESSERA_REQUIRE(gate_up.size(2) == hidden && gate_up.size(1) % 2 == 0 &&
                      down.sizes() == Shape({local, hidden, intermediate}) &&
                      router_logits.dim() == 2 && router_logits.size(0) == tokens && local >= 1 &&
                      first_expert >= 0 && first_expert <= router_logits.size(1) - local &&
                      out.dtype() == x.dtype() && out.sizes() == x.sizes(),
                  "{}: arguments do not agree: x {}, router_logits {}, gate_up_weights {}, "
                  "down_weights {}, first_expert {}, output {}",
                  op, x.str(), router_logits.str(), gate_up.str(), down.str(), first_expert,
                  out.str());
  // Each stack of weights is x's dtype, or a block format with whole blocks along its rows.
  for (const auto& [name, weights, width] :
       {std::tuple{"gate_up_weights", &gate_up, hidden}, {"down_weights", &down, intermediate}})
    TESSERA_REQUIRE(
        weights->dtype() == x.dtype() ||
            (is_quantized(weights->dtype()) && width % block_elements(weights->dtype()) == 0),
        "{}: {} {} must be x's dtype ({}) or a block format with whole blocks along "
        "its rows of {}",
        op, name, weights->str(), dtype_name(x.dtype()), width);
  TESSERA_REQUIRE(local <= kGroupThreads,
                  "{}: {} experts on one device are more than the {} its GPU kernel groups; "
                  "shard them (--enable-expert-parallel)",
                  op, local, kGroupThreads);
  if (tokens == 0) return;
  LaunchScope scope(x.device());
  const gpuStream_t stream = scope.stream();
  const Routes routes = route(op, router_logits, top_k, renormalize, stream);
  const bool tensor_cores = fused_moe_fits_tensor_cores(x, gate_up, down);
  TESSERA_REQUIRE(kernel != MoeKernel::tensor_cores || tensor_cores,
                  "{}: x {}, gate_up_weights {} and down_weights {} do not fit its tensor-core "
                  "kernel (bf16 or f16 rows of whole 16-byte chunks on a CUDA device of compute "
                  "capability 8.0 or newer)",
                  op, x.str(), gate_up.str(), down.str());
  // The skinny kernel reads an expert's weights once per 8 of its pairs, the tiled ones once per
  // 64: skinny while the pairs per expert are few (docs/performance.md has the crossover).
  if (kernel == MoeKernel::automatic) {
    const bool quantized = is_quantized(gate_up.dtype()) || is_quantized(down.dtype());
    const int64_t skinny_pairs_per_expert = quantized      ? kSkinnyPairsPerQuantizedExpert
                                            : tensor_cores ? kSkinnyPairsPerExpertBeforeTensorCores
                                                           : kSkinnyPairsPerExpertBeforeTiled;
    kernel = tokens * top_k <= skinny_pairs_per_expert * local ? MoeKernel::skinny
             : tensor_cores                                    ? MoeKernel::tensor_cores
                                                               : MoeKernel::tiled;
  }
  visit_device_float_dtype(op, x.dtype(), [&]<typename T>() {
    launch_experts<T>(x, gate_up, down, routes, tokens, top_k, first_expert, local, kernel,
                      static_cast<T*>(out.data_ptr()), stream);
  });
}

}  // namespace tessera::gpu
