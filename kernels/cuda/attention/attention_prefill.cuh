// The prefill/mixed attention kernel: variable-length sequences whose new tokens attend causally
// over their cached prefix and themselves (a decode token is a sequence with one new token), in
// the flash-attention pattern on CUDA cores (f32 FMA; no tensor cores yet).
//
// A block computes one q head for a tile of kQueryTile consecutive new tokens of one sequence. It
// walks the keys 0 .. (last row's position) in tiles of kKeyTile, gathering each K/V tile through
// the block table into shared memory as f32, and keeps an online softmax per row (running max m,
// running sum l, output accumulator o rescaled by exp2(m_old - m_new)), so scores never leave
// the block. Queries are pre-multiplied by scale * log2(e) so the softmax uses exp2. With a
// sliding window the walk starts at the tile holding the first row's first visible key, and
// scores are softcapped (when asked) before the mask.
//
// Thread layout (128 threads = 16 x 8): thread (ty, tx) owns query rows ty + 16 i (i < 4), key
// columns tx + 8 j (j < 4) of the score tile, and output columns 4 (tx + 8 g) .. + 3 of its rows.
// A row's 8 owners are 8 consecutive lanes of one warp, so row maxima and sums need 3 shuffles.
// Row and column strides are padded (+4 floats, +1 float) so the float4 and scalar shared loads
// of a warp hit distinct banks.
#pragma once

#include <cmath>

#include "kernels/cuda/attention/attention_common.cuh"

namespace tessera::gpu::attention {

constexpr int kPrefillThreads = 128;
constexpr int kQueryTile = 64;
constexpr int kKeyTile = 32;
constexpr int kPrefillRowsPerThread = kQueryTile / 16;  // rows ty + 16 i
constexpr int kPrefillKeysPerThread = kKeyTile / 8;     // columns tx + 8 j
constexpr int kProbabilityStride = kKeyTile + 1;

// Floats between consecutive rows of the q/k/v tiles for a padded head size.
__host__ __device__ constexpr int prefill_row_stride(int padded_head) {
  return padded_head + 4;
}

// Dynamic shared memory of the prefill kernel: the q tile, one k and one v tile, probabilities.
inline size_t prefill_shared_bytes(int head_size) {
  const int stride = prefill_row_stride(round_up_to_4(head_size));
  return sizeof(float) * (static_cast<size_t>(kQueryTile + 2 * kKeyTile) * stride +
                          static_cast<size_t>(kQueryTile) * kProbabilityStride);
}

// Grid: x = query tiles (of the longest query), y = q heads, z = sequences.
template <typename T, typename C, int kHeadSize, bool kExact>
__global__ void __launch_bounds__(kPrefillThreads)
    prefill_attention_kernel(AttentionParams<T, C> params) {
  extern __shared__ float4 prefill_shared[];
  wait_for_prior_grids();
  allow_next_grid();
  // Longest-running tiles (last in the sequence: most keys) start first.
  const int query_tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int seq = static_cast<int>(blockIdx.z);
  const int query_begin = params.query_start_loc[seq];
  const int query_len = params.query_start_loc[seq + 1] - query_begin;
  const int tile_begin = query_tile * kQueryTile;
  if (tile_begin >= query_len) return;
  const int rows = min(kQueryTile, query_len - tile_begin);
  // Position (in the sequence) of the tile's first row; rows are consecutive positions.
  const int first_position = params.seq_lens[seq] - query_len + tile_begin;
  const int keys = first_position + rows;  // the last row sees keys 0 .. keys - 1

  const int head_size = kExact ? kHeadSize : params.head_size;
  const int padded = padded_head_size<kHeadSize, kExact>(head_size);
  const int stride = prefill_row_stride(padded);
  float* q_tile = reinterpret_cast<float*>(prefill_shared);
  float* k_tile = q_tile + kQueryTile * stride;
  float* v_tile = k_tile + kKeyTile * stride;
  float* probabilities = v_tile + kKeyTile * stride;

  const int kv_head = head / (params.num_heads / params.num_kv_heads);
  const int64_t query_width = static_cast<int64_t>(params.num_heads) * head_size;
  const int32_t* block_table =
      params.block_tables + static_cast<int64_t>(seq) * params.max_blocks_per_seq;

  load_tile<T, kHeadSize, kExact, kPrefillThreads, kQueryTile>(
      q_tile, stride, head_size, params.scale_log2, [&](int row) -> const T* {
        if (row >= rows) return nullptr;
        return params.query + (query_begin + tile_begin + row) * params.query_row_stride +
               static_cast<int64_t>(head) * head_size;
      });

  const int ty = static_cast<int>(threadIdx.x) / 8;
  const int tx = static_cast<int>(threadIdx.x) % 8;
  constexpr int kOutGroups = kHeadSize / 32;  // float4 output groups per row and thread
  const int column_groups = padded / 4;       // float4 groups in a padded row

  float row_max[kPrefillRowsPerThread];
  float row_sum[kPrefillRowsPerThread];  // this thread's columns only; summed over tx at the end
  int row_position[kPrefillRowsPerThread];
  float4 out[kPrefillRowsPerThread][kOutGroups];
#pragma unroll
  for (int i = 0; i < kPrefillRowsPerThread; ++i) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
    // Rows past the query repeat the last row, so their math stays finite; they are not stored.
    row_position[i] = first_position + min(ty + 16 * i, rows - 1);
#pragma unroll
    for (int g = 0; g < kOutGroups; ++g) out[i][g] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }

  const int first_key = window_first_key(first_position, params.sliding_window);
  for (int key_begin = first_key / kKeyTile * kKeyTile; key_begin < keys; key_begin += kKeyTile) {
    __syncthreads();  // the previous tile's readers are done (and the q tile is visible)
    auto cache_row = [&](const C* cache) {
      return [&, cache](int row) -> const C* {
        const int position = key_begin + row;
        if (position >= keys) return nullptr;
        return cache + cache_row_offset(params, block_table, position, kv_head);
      };
    };
    load_tile<C, kHeadSize, kExact, kPrefillThreads, kKeyTile>(k_tile, stride, head_size, 1.0f,
                                                               cache_row(params.key_cache));
    load_tile<C, kHeadSize, kExact, kPrefillThreads, kKeyTile>(v_tile, stride, head_size, 1.0f,
                                                               cache_row(params.value_cache));
    __syncthreads();

    // Scores (already in the exp2 domain): q rows . k rows over the padded head.
    float score[kPrefillRowsPerThread][kPrefillKeysPerThread] = {};
#pragma unroll 4
    for (int d = 0; d < padded; d += 4) {
      float4 q[kPrefillRowsPerThread];
      float4 k[kPrefillKeysPerThread];
#pragma unroll
      for (int i = 0; i < kPrefillRowsPerThread; ++i)
        q[i] = *reinterpret_cast<const float4*>(q_tile + (ty + 16 * i) * stride + d);
#pragma unroll
      for (int j = 0; j < kPrefillKeysPerThread; ++j)
        k[j] = *reinterpret_cast<const float4*>(k_tile + (tx + 8 * j) * stride + d);
#pragma unroll
      for (int i = 0; i < kPrefillRowsPerThread; ++i) {
#pragma unroll
        for (int j = 0; j < kPrefillKeysPerThread; ++j) score[i][j] = dot4(q[i], k[j], score[i][j]);
      }
    }

    // Softcap, causal and window mask, online softmax update, probabilities to shared memory.
    // Without a window every row sees key 0 in the first tile, so its running max is finite
    // from then on; with one, a row may see none of a tile (softmax_base).
#pragma unroll
    for (int i = 0; i < kPrefillRowsPerThread; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPrefillKeysPerThread; ++j) {
        const int key = key_begin + tx + 8 * j;
        score[i][j] = softcap_score(score[i][j], params.softcap_log2);
        if (key > row_position[i] || before_window(key, row_position[i], params.sliding_window))
          score[i][j] = -INFINITY;
        tile_max = fmaxf(tile_max, score[i][j]);
      }
      tile_max = fmaxf(tile_max, GPU_SHFL_XOR(tile_max, 1));
      tile_max = fmaxf(tile_max, GPU_SHFL_XOR(tile_max, 2));
      tile_max = fmaxf(tile_max, GPU_SHFL_XOR(tile_max, 4));
      const float new_max = softmax_base(fmaxf(row_max[i], tile_max));
      const float correction = exp2f(row_max[i] - new_max);  // 0 on the first tile
      row_max[i] = fmaxf(row_max[i], tile_max);
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kPrefillKeysPerThread; ++j) {
        const float probability = exp2f(score[i][j] - new_max);
        probabilities[(ty + 16 * i) * kProbabilityStride + tx + 8 * j] = probability;
        tile_sum += probability;
      }
      row_sum[i] = row_sum[i] * correction + tile_sum;
#pragma unroll
      for (int g = 0; g < kOutGroups; ++g) out[i][g] = scaled(out[i][g], correction);
    }
    // A row's probabilities come from lanes of the same warp; a block barrier keeps this
    // portable to wavefronts without __syncwarp.
    __syncthreads();

    // out += probabilities @ v over the tile's keys (keys past `keys` have zero rows in v).
    const int tile_keys = min(kKeyTile, keys - key_begin);
#pragma unroll 4
    for (int key = 0; key < tile_keys; ++key) {
      float p[kPrefillRowsPerThread];
#pragma unroll
      for (int i = 0; i < kPrefillRowsPerThread; ++i)
        p[i] = probabilities[(ty + 16 * i) * kProbabilityStride + key];
#pragma unroll
      for (int g = 0; g < kOutGroups; ++g) {
        const int group = tx + 8 * g;
        if (!kExact && group >= column_groups) break;
        const float4 v = *reinterpret_cast<const float4*>(v_tile + key * stride + 4 * group);
#pragma unroll
        for (int i = 0; i < kPrefillRowsPerThread; ++i) add_scaled(out[i][g], p[i], v);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kPrefillRowsPerThread; ++i) {
    float total = row_sum[i];
    total += GPU_SHFL_XOR(total, 1);
    total += GPU_SHFL_XOR(total, 2);
    total += GPU_SHFL_XOR(total, 4);
    const int row = ty + 16 * i;
    if (row >= rows) continue;
    // total >= 1: the row's max contributes exp2(0)
    const float inverse = params.value_scale / total;
    T* out_row = params.out + (query_begin + tile_begin + row) * query_width +
                 static_cast<int64_t>(head) * head_size;
#pragma unroll
    for (int g = 0; g < kOutGroups; ++g) {
      const int group = tx + 8 * g;
      if (!kExact && group >= column_groups) break;
      store_four<kExact>(out_row, 4 * group, head_size, scaled(out[i][g], inverse));
    }
  }
}

}  // namespace tessera::gpu::attention
