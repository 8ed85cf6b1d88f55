// fused_moe's kernels for experts in ggml's block formats (kernels/cuda/experts/fused_moe.cu), as
// llama.cpp's quantized mixtures store them:
//   - skinny (decode): a warp per weight row as the float skinny kernels, each lane dequantizing
//     chunks of 32 values of the row into registers (the same float operations as the CPU's
//     unpack and llama.cpp) and taking them against the pairs' rows of x as they are (f32 sums;
//     the CPU rounds x to 8 bits per block instead);
//   - dequantize: the experts that received pairs written out in x's dtype, for the tiled and
//     tensor-core grouped GEMMs (prefill), which then read them as float weights.
// Rows are whole blocks (the op's meta checks it), so chunk c of a row is chunk c % (elements /
// 32) of its block c / (elements / 32), and an expert's rows one after another are one long row.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/experts/moe_grouping.cuh"
#include "kernels/cuda/gemm/quantized_blocks.cuh"
#include "runtime/dtype.h"

namespace tessera::gpu {

constexpr int kQuantizedChunk = 32;  // values a lane dequantizes at once

// Bytes of a row of `width` values in D's blocks.
template <DType D>
__device__ __forceinline__ int64_t quantized_row_bytes(int64_t width) {
  return width / BlockLayout<D>::elements * BlockLayout<D>::bytes;
}

// values = the 32 values from 32 c on of blocks in D's format that start at `row`.
template <DType D>
__device__ __forceinline__ void dequantize_row_chunk(const uint8_t* row, int64_t c,
                                                     float (&values)[kQuantizedChunk]) {
  constexpr int kChunksPerBlock = BlockLayout<D>::elements / kQuantizedChunk;
  dequantize_chunk<D>(row + c / kChunksPerBlock * BlockLayout<D>::bytes,
                      static_cast<int>(c % kChunksPerBlock), values);
}

// values = the 32 values of x (or of the activations) from `at` on: 16-byte loads where `at` is
// aligned to them (the same on the whole warp), else one by one.
template <typename T>
__device__ __forceinline__ void load_chunk(const T* at, float (&values)[kQuantizedChunk]) {
  constexpr int E = kPackElements<T>;
  if (reinterpret_cast<uintptr_t>(at) % 16 == 0) {
#pragma unroll
    for (int p = 0; p < kQuantizedChunk / E; ++p) {
      const Pack<T, E> pack = load_pack<E>(at + p * E);
#pragma unroll
      for (int e = 0; e < E; ++e) values[p * E + e] = to_compute(pack.values[e]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kQuantizedChunk; ++i) values[i] = to_compute(at[i]);
}

// Warp w of block b takes intermediate column j = b * warps + w of tile blockIdx.y: rows j (gate)
// and I + j (up) of its expert, dotted with each pair's token row of x.
template <typename T, DType D>
__global__ void __launch_bounds__(kSkinnyThreads, 2)
    gate_up_quantized_skinny_kernel(const T* x, const uint8_t* gate_up, Grouping grouping,
                                    T* activations) {
  SkinnyWarp warp;
  if (!find_skinny_warp(grouping, grouping.intermediate, warp)) return;
  const int64_t hidden = grouping.hidden, intermediate = grouping.intermediate;
  const int(&pairs)[kSkinnyPairs] = warp.pairs;
  const T* inputs[kSkinnyPairs];
  pair_token_rows(x, warp, grouping, inputs);
  const int64_t row_bytes = quantized_row_bytes<D>(hidden);
  const uint8_t* gate_row = gate_up + (warp.expert * 2 * intermediate + warp.row) * row_bytes;
  const uint8_t* up_row = gate_row + intermediate * row_bytes;
  float gate[kSkinnyPairs] = {}, up[kSkinnyPairs] = {};
  for (int64_t c = warp.lane; c < hidden / kQuantizedChunk; c += GPU_WARP_SIZE) {
    float gate_values[kQuantizedChunk], up_values[kQuantizedChunk];
    dequantize_row_chunk<D>(gate_row, c, gate_values);
    dequantize_row_chunk<D>(up_row, c, up_values);
#pragma unroll
    for (int r = 0; r < kSkinnyPairs; ++r) {
      if (pairs[r] < 0) continue;  // the same on every warp.lane: no divergence
      float input[kQuantizedChunk];
      load_chunk(inputs[r] + c * kQuantizedChunk, input);
#pragma unroll
      for (int i = 0; i < kQuantizedChunk; ++i) {
        gate[r] = fmaf(gate_values[i], input[i], gate[r]);
        up[r] = fmaf(up_values[i], input[i], up[r]);
      }
    }
  }
  store_skinny_activations(pairs, gate, up, warp.lane, warp.row, intermediate, activations);
}

// Warp w of block b takes hidden row h = b * warps + w of tile blockIdx.y's expert's down weights,
// dotted with each pair's activations.
template <typename T, DType D>
__global__ void __launch_bounds__(kSkinnyThreads)
    down_quantized_skinny_kernel(const T* activations, const uint8_t* down, Grouping grouping,
                                 float* expert_out) {
  SkinnyWarp warp;
  if (!find_skinny_warp(grouping, grouping.hidden, warp)) return;
  const int64_t hidden = grouping.hidden, intermediate = grouping.intermediate;
  const int(&pairs)[kSkinnyPairs] = warp.pairs;
  const uint8_t* weight_row =
      down + (warp.expert * hidden + warp.row) * quantized_row_bytes<D>(intermediate);
  float sum[kSkinnyPairs] = {};
  for (int64_t c = warp.lane; c < intermediate / kQuantizedChunk; c += GPU_WARP_SIZE) {
    float values[kQuantizedChunk];
    dequantize_row_chunk<D>(weight_row, c, values);
#pragma unroll
    for (int r = 0; r < kSkinnyPairs; ++r) {
      if (pairs[r] < 0) continue;
      float input[kQuantizedChunk];
      load_chunk(activations + pairs[r] * intermediate + c * kQuantizedChunk, input);
#pragma unroll
      for (int i = 0; i < kQuantizedChunk; ++i) sum[r] = fmaf(values[i], input[i], sum[r]);
    }
  }
  store_skinny_outputs(pairs, sum, warp.lane, warp.row, hidden, expert_out);
}

constexpr int kDequantizeThreads = 256;

// out[e] = expert e's `values` values (rows of whole blocks) in T, for the experts blockIdx.y
// that received pairs (expert_pairs[e] > 0); the others are left as they are, never read. A lane
// dequantizes one chunk; the warp's chunks pass through shared memory so that its stores are of
// consecutive values.
template <typename T, DType D>
__global__ void __launch_bounds__(kDequantizeThreads)
    dequantize_experts_kernel(const uint8_t* weights, int64_t values, const int32_t* expert_pairs,
                              T* out) {
  constexpr int kWarps = kDequantizeThreads / GPU_WARP_SIZE;
  __shared__ float staged[kWarps][GPU_WARP_SIZE][kQuantizedChunk + 1];  // +1: no bank conflicts
  wait_for_prior_grids();
  allow_next_grid();
  const int64_t expert = blockIdx.y;
  if (expert_pairs[expert] == 0) return;
  const uint8_t* blocks = weights + expert * quantized_row_bytes<D>(values);
  T* target = out + expert * values;
  const int warp = static_cast<int>(threadIdx.x) / GPU_WARP_SIZE;
  const int lane = static_cast<int>(threadIdx.x) % GPU_WARP_SIZE;
  const int64_t chunks = values / kQuantizedChunk;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarps * GPU_WARP_SIZE;
  // The loop's bounds are the same on the whole warp.
  for (int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * GPU_WARP_SIZE;
       first < chunks; first += step) {
    if (first + lane < chunks) {
      float chunk[kQuantizedChunk];
      dequantize_row_chunk<D>(blocks, first + lane, chunk);
#pragma unroll
      for (int i = 0; i < kQuantizedChunk; ++i) staged[warp][lane][i] = chunk[i];
    }
    GPU_SYNCWARP();
    for (int index = lane; index < GPU_WARP_SIZE * kQuantizedChunk; index += GPU_WARP_SIZE) {
      const int64_t c = first + index / kQuantizedChunk;
      if (c < chunks)
        target[c * kQuantizedChunk + index % kQuantizedChunk] =
            from_compute<T>(staged[warp][index / kQuantizedChunk][index % kQuantizedChunk]);
    }
    GPU_SYNCWARP();  // read before the next chunks overwrite them
  }
}

}  // namespace tessera::gpu
