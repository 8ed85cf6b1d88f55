// The prefill/mixed attention kernel on tensor cores (CUDA, sm_80+; bf16 and f16 with head size
// 64 or 128): the flash-attention-2 pattern with mma.sync m16n8k16 (f32 accumulation). Other
// dtypes, head sizes and HIP use the CUDA-core kernel of attention_prefill.cuh, which has the
// same grid and semantics.
//
// A block of 4 warps computes one q head for kMmaQueryTile = 64 consecutive new tokens of one
// sequence, 16 rows per warp. Each warp keeps its q rows as mma A fragments in registers for the
// whole walk over keys 0 .. (last row's position) in tiles of kMmaKeyTile = 64:
//   - K and V tiles are gathered through the block table into shared memory with cp.async,
//     double-buffered (tile j + 1 loads while tile j computes); rows past the keys are zero-filled;
//   - S = Q K^T: B fragments of K come from ldmatrix (K rows are the mma's n columns);
//   - the online softmax runs on the S accumulators in registers (a row lives in the 4 lanes of a
//     quad: 2 shuffles per reduction), scores scaled in f32 into the exp2 domain;
//   - O += P V: the S accumulator layout is the A fragment layout, so P goes from registers to
//     the mma after rounding to T; B fragments of V come from ldmatrix.trans.
// Shared rows are padded by 8 elements (16 bytes) so ldmatrix's 8 row addresses hit distinct
// banks. With a sliding window the walk starts at the tile holding the first row's first visible
// key; scores are softcapped (when asked) before the mask.
//
// Fragment layouts: kernels/cuda/mma.cuh.
#pragma once

#include "kernels/cuda/gpu_vendor.h"

#if !defined(TESSERA_GPU_HIP)

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_mma_tile.cuh"
#include "kernels/cuda/mma.cuh"

namespace tessera::gpu::attention {

constexpr int kMmaThreads = 128;
constexpr int kMmaQueryTile = 64;  // 16 rows per warp
constexpr int kMmaKeyTile = 64;
constexpr int kMmaKeyGroups = kMmaKeyTile / 8;  // n tiles of S

// Elements between consecutive rows of a shared K or V tile.
template <int kHeadSize>
inline constexpr int kMmaRowStride = kHeadSize + 8;

// Two buffers of a K tile and a V tile.
template <typename T, int kHeadSize>
constexpr size_t mma_prefill_shared_bytes() {
  return 2 * 2 * static_cast<size_t>(kMmaKeyTile) * kMmaRowStride<kHeadSize> * sizeof(T);
}

// Grid: x = query tiles (of the longest query), y = q heads, z = sequences.
template <typename T, typename C, int kHeadSize>
__global__ void __launch_bounds__(kMmaThreads)
    mma_prefill_attention_kernel(AttentionParams<T, C> params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // the host dispatches here only on sm_80+
#else
  static_assert(kHeadSize % 16 == 0 && sizeof(T) == 2);
  wait_for_prior_grids();
  allow_next_grid();
  constexpr int kStride = kMmaRowStride<kHeadSize>;
  constexpr int kTileElements = kMmaKeyTile * kStride;
  constexpr int kSteps = kHeadSize / 16;        // k steps of S = Q K^T
  constexpr int kOutGroups = kHeadSize / 8;     // n tiles of O
  constexpr int kChunksPerRow = kHeadSize / 8;  // 16-byte chunks of a K/V row
  constexpr int kChunksPerThread = kMmaKeyTile * kChunksPerRow / kMmaThreads;
  static_assert(kMmaKeyTile * kChunksPerRow % kMmaThreads == 0);

  extern __shared__ uint4 mma_shared[];
  T* tiles = reinterpret_cast<T*>(mma_shared);  // [buffer][K, V][kMmaKeyTile][kStride]

  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // longest first
  const int head = static_cast<int>(blockIdx.y);
  const int seq = static_cast<int>(blockIdx.z);
  const int query_begin = params.query_start_loc[seq];
  const int query_len = params.query_start_loc[seq + 1] - query_begin;
  const int tile_begin = query_tile * kMmaQueryTile;
  if (tile_begin >= query_len) return;
  const int rows = min(kMmaQueryTile, query_len - tile_begin);
  const int first_position = params.seq_lens[seq] - query_len + tile_begin;
  const int keys = first_position + rows;  // the last row sees keys 0 .. keys - 1
  const int kv_head = head / (params.num_heads / params.num_kv_heads);
  const int64_t query_width = static_cast<int64_t>(params.num_heads) * kHeadSize;
  const int32_t* block_table =
      params.block_tables + static_cast<int64_t>(seq) * params.max_blocks_per_seq;

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group = lane / 4;      // the fragment row (and B column) of this lane
  const int quad_lane = lane % 4;  // the fragment column pair of this lane

  // Starts the asynchronous gather of key tile `tile` into buffer `buffer`: each thread copies
  // kChunksPerThread 16-byte chunks of K and of V (rows tid / kChunksPerRow + ...).
  auto load_key_tile = [&](int tile, int buffer) {
    T* k_tile = tiles + buffer * 2 * kTileElements;
    T* v_tile = k_tile + kTileElements;
    // (An FP8 cache: every chunk loaded before any is stored, so the loads overlap.)
    [[maybe_unused]] CodeChunk key_codes[kChunksPerThread], value_codes[kChunksPerThread];
#pragma unroll
    for (int c = 0; c < kChunksPerThread; ++c) {
      const int chunk = tid + c * kMmaThreads;
      const int row = chunk / kChunksPerRow;
      const int column = chunk % kChunksPerRow * 8;
      const int position = tile * kMmaKeyTile + row;
      const bool valid = position < keys;
      const int64_t offset =
          valid ? cache_row_offset(params, block_table, position, kv_head) + column : 0;
      if constexpr (std::is_same_v<C, T>) {
        copy_async_16(k_tile + row * kStride + column, params.key_cache + offset, valid);
        copy_async_16(v_tile + row * kStride + column, params.value_cache + offset, valid);
      } else {
        key_codes[c] = load_code_chunk(params.key_cache + offset, valid);
        value_codes[c] = load_code_chunk(params.value_cache + offset, valid);
      }
    }
    if constexpr (!std::is_same_v<C, T>) {
#pragma unroll
      for (int c = 0; c < kChunksPerThread; ++c) {
        const int chunk = tid + c * kMmaThreads;
        const int row = chunk / kChunksPerRow;
        const int column = chunk % kChunksPerRow * 8;
        store_decoded_chunk(k_tile + row * kStride + column, key_codes[c]);
        store_decoded_chunk(v_tile + row * kStride + column, value_codes[c]);
      }
    }
    copy_async_commit();
  };
  const int key_tiles = (keys + kMmaKeyTile - 1) / kMmaKeyTile;
  const int first_tile = window_first_key(first_position, params.sliding_window) / kMmaKeyTile;
  load_key_tile(first_tile, first_tile % 2);

  // This warp's 16 q rows as A fragments; rows past the query are zeros.
  const int row_low = warp * 16 + group;  // and row_low + 8
  const T* query_low = row_low < rows
                           ? params.query +
                                 (query_begin + tile_begin + row_low) * params.query_row_stride +
                                 static_cast<int64_t>(head) * kHeadSize
                           : nullptr;
  const T* query_high =
      row_low + 8 < rows
          ? params.query + (query_begin + tile_begin + row_low + 8) * params.query_row_stride +
                static_cast<int64_t>(head) * kHeadSize
          : nullptr;
  uint32_t q_fragments[kSteps][4];
  load_query_fragments(query_low, query_high, quad_lane, q_fragments);
  // Positions of the two rows; rows past the query repeat the last row (finite, not stored).
  const int position_low = first_position + min(row_low, rows - 1);
  const int position_high = first_position + min(row_low + 8, rows - 1);

  float out[kOutGroups][4];
#pragma unroll
  for (int n = 0; n < kOutGroups; ++n) out[n][0] = out[n][1] = out[n][2] = out[n][3] = 0.0f;
  float max_low = -INFINITY, max_high = -INFINITY;
  float sum_low = 0.0f, sum_high = 0.0f;  // this lane's columns; summed over the quad at the end

  for (int tile = first_tile; tile < key_tiles; ++tile) {
    const int buffer = tile % 2;
    if (tile + 1 < key_tiles) {
      load_key_tile(tile + 1, 1 - buffer);
      copy_async_wait<1>();  // this tile's group is complete; the next one may be in flight
    } else {
      copy_async_wait<0>();
    }
    __syncthreads();  // every thread's copies of this tile are visible
    const T* k_tile = tiles + buffer * 2 * kTileElements;
    const T* v_tile = k_tile + kTileElements;
    const int key_begin = tile * kMmaKeyTile;

    // S = Q K^T for this warp's 16 rows and the tile's 64 keys.
    float scores[kMmaKeyGroups][4];
    score_tile<T, kSteps, kMmaKeyGroups, kStride>(q_fragments, k_tile, lane, scores);

    // Scale into the exp2 domain, softcap, mask keys after each row's position (and before its
    // window), update the softmax.
    const bool diagonal = key_begin + kMmaKeyTile - 1 > first_position;
    const bool windowed = params.sliding_window > 0;
#pragma unroll
    for (int n = 0; n < kMmaKeyGroups; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float score = softcap_score(scores[n][e] * params.scale_log2, params.softcap_log2);
        const int key = key_begin + n * 8 + 2 * quad_lane + (e & 1);
        const int position = e < 2 ? position_low : position_high;
        if ((diagonal && key > position) ||
            (windowed && before_window(key, position, params.sliding_window)))
          score = -INFINITY;
        scores[n][e] = score;
      }
    }
    softmax_tile(scores, max_low, max_high, sum_low, sum_high, out);
    accumulate_values<T, kMmaKeyGroups, kOutGroups, kStride>(scores, v_tile, lane, out);
    __syncthreads();  // the buffer is read; the next iteration's copies may overwrite it
  }

  sum_low = quad_sum(sum_low);
  sum_high = quad_sum(sum_high);
  // The sums are >= 1: the row's max contributes exp2(0).
  const float inverse_low = params.value_scale / sum_low;
  const float inverse_high = params.value_scale / sum_high;
  T* out_low = query_low == nullptr
                   ? nullptr
                   : params.out + (query_begin + tile_begin + row_low) * query_width +
                         static_cast<int64_t>(head) * kHeadSize;
  T* out_high = query_high == nullptr
                    ? nullptr
                    : params.out + (query_begin + tile_begin + row_low + 8) * query_width +
                          static_cast<int64_t>(head) * kHeadSize;
#pragma unroll
  for (int n = 0; n < kOutGroups; ++n) {
    const int column = n * 8 + 2 * quad_lane;
    if (out_low != nullptr) {
      *reinterpret_cast<uint32_t*>(out_low + column) =
          pack_pair<T>(out[n][0] * inverse_low, out[n][1] * inverse_low);
    }
    if (out_high != nullptr) {
      *reinterpret_cast<uint32_t*>(out_high + column) =
          pack_pair<T>(out[n][2] * inverse_high, out[n][3] * inverse_high);
    }
  }
#endif
}

}  // namespace tessera::gpu::attention

#endif  // !TESSERA_GPU_HIP
