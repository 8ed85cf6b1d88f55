// Pieces shared by the paged-attention kernels (attention_prefill.cuh, attention_decode.cuh):
// the launch parameters, the cache row of a sequence position through its block table, and
// cooperative loads of q/k/v rows (storage type T in global memory) into f32 shared-memory tiles.
//
// The cache holds C: T, or Float8E4M3 codes of K / key_scale and V / value_scale (an FP8 KV cache).
// Codes are read as they are (e4m3 values are exact in f16 and bf16): the host folds key_scale into
// scale_log2, and the kernels multiply the output by value_scale. Steps with an FP8 cache write it
// first (reshape_and_cache), never from the decode kernels.
//
// Two flavours of every kernel: kExact (head_size == kHeadSize, 64 or 128, pointers 16-byte
// aligned) moves rows in 16-byte packs with compile-time loop bounds; the generic one
// (kHeadSize == kMaxHeadSize, any head_size up to it) moves single elements and pads rows to a
// multiple of 4 with zeros, for the small heads of test models (8, 16, 32) and odd sizes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "runtime/float8.h"

namespace tessera::gpu::attention {

// Head sizes up to this run through the generic kernels.
constexpr int kMaxHeadSize = 256;

template <typename T, typename C = T>
struct AttentionParams {
  const T* query;                  // [tokens, num_heads * head_size], rows query_row_stride apart
  C* key_cache;                    // [num_blocks, block_size, num_kv_heads, head_size]
  C* value_cache;                  // same
  T* out;                          // [tokens, num_heads * head_size]
  const int32_t* query_start_loc;  // [num_seqs + 1]
  const int32_t* seq_lens;         // [num_seqs]
  const int32_t* block_tables;     // [num_seqs, max_blocks_per_seq]
  int num_heads;
  int num_kv_heads;
  int head_size;
  int block_size;
  int max_blocks_per_seq;
  float scale_log2;    // the softmax scale (times key_scale) times log2(e): the exp2 domain
  float value_scale;   // multiplies the output: 1, or an FP8 cache's value scale
  int sliding_window;  // a query at position p sees keys > p - sliding_window; 0: every key
  float softcap_log2;  // the logit softcap times log2(e); 0: none
  // Decode only: this step's K/V rows, which the decode kernel writes into the cache itself (no
  // reshape_and_cache launch) and reads from here wherever a key's slot is the new one. Null
  // wherever the launch wrote the cache first (prefill, and decode steps whose rows it cannot).
  const T* new_key;             // [tokens, num_kv_heads * head_size], new_key_row_stride apart
  const T* new_value;           // the same, new_value_row_stride apart
  const int32_t* slot_mapping;  // [tokens]; -1 (padding) or a slot past num_slots: not written
  int64_t num_slots;            // num_blocks * block_size
  // Elements from one token's row to the next: of `query` (num_heads * head_size when
  // contiguous) and of new_key and new_value (num_kv_heads * head_size when contiguous).
  // rotary_attention passes the qkv projection's rows, which hold all three.
  int64_t query_row_stride;
  int64_t new_key_row_stride;
  int64_t new_value_row_stride;
  // rotary_attention's decode on tensor cores only: the query and the step's key are rotated as
  // rotary_embedding would rotate them (pairs over the whole head; attention_rope.cuh). Null
  // rope_cos_sin: no rotation.
  const float* rope_cos_sin;   // [rope_max_position, head_size]: cos, then sin
  const void* rope_positions;  // [tokens], i32 or i64 (rope_positions_i64)
  int64_t rope_max_position;
  bool rope_positions_i64;
  bool rope_is_neox;  // pairs (i, i + head_size / 2); otherwise (2i, 2i + 1)
};

// tanh softcapping in the exp2 domain: with s = score * log2(e) and c = cap * log2(e),
// c * tanh(s / c) is (cap * tanh(score / cap)) * log2(e). Applied before the mask.
__device__ __forceinline__ float softcap_score(float score, float softcap_log2) {
  return softcap_log2 > 0.0f ? softcap_log2 * tanhf(score / softcap_log2) : score;
}

// Whether `key` lies before the sliding window of a query at `position` (never without one).
__device__ __forceinline__ bool before_window(int key, int position, int sliding_window) {
  return sliding_window > 0 && key <= position - sliding_window;
}

// The step's new K/V rows of (token, kv head), when the launch passes them (the decode kernels
// store them into the cache themselves and read them from there): the new token's slot (-1
// without them) and the rows.
template <typename T>
struct NewRows {
  int64_t slot = -1;
  const T* key = nullptr;
  const T* value = nullptr;
};

template <typename T, typename C>
__device__ __forceinline__ NewRows<T> step_rows(const AttentionParams<T, C>& params, int token,
                                                int kv_head, int head_size) {
  NewRows<T> rows;
  if (params.slot_mapping == nullptr) return rows;
  rows.slot = params.slot_mapping[token];
  const int64_t head_offset = static_cast<int64_t>(kv_head) * head_size;
  rows.key = params.new_key + static_cast<int64_t>(token) * params.new_key_row_stride + head_offset;
  rows.value =
      params.new_value + static_cast<int64_t>(token) * params.new_value_row_stride + head_offset;
  return rows;
}

// The first key a query at `position` sees.
__device__ __forceinline__ int window_first_key(int position, int sliding_window) {
  return sliding_window > 0 ? max(0, position - sliding_window + 1) : 0;
}

// The running max to subtract in an online softmax step: a row whose keys so far all lie outside
// its window has max -inf, and subtracting 0 instead keeps exp2(-inf - max) = 0, not NaN.
__device__ __forceinline__ float softmax_base(float running_max) {
  return running_max == -INFINITY ? 0.0f : running_max;
}

__host__ __device__ constexpr int round_up_to_4(int value) {
  return (value + 3) / 4 * 4;
}

// Row width in shared memory: the head padded to a multiple of 4 (float4 access), zeros past it.
template <int kHeadSize, bool kExact>
__device__ __forceinline__ int padded_head_size(int head_size) {
  if constexpr (kExact) {
    return kHeadSize;
  } else {
    return round_up_to_4(head_size);
  }
}

// The cache slot of a sequence position: the block table maps the position's block to a physical
// block. 64-bit: large caches exceed 2^31 elements.
template <typename T, typename C>
__device__ __forceinline__ int64_t cache_slot(const AttentionParams<T, C>& params,
                                              const int32_t* block_table, int position) {
  const int64_t block = block_table[position / params.block_size];
  return block * params.block_size + position % params.block_size;
}

// Element offset of the cache row of (position, kv_head).
template <typename T, typename C>
__device__ __forceinline__ int64_t cache_row_offset(const AttentionParams<T, C>& params,
                                                    const int32_t* block_table, int position,
                                                    int kv_head) {
  return (cache_slot(params, block_table, position) * params.num_kv_heads + kv_head) *
         params.head_size;
}

// Fills tile[row * stride + d] (f32, kRows rows of `padded` columns) with row_source(row)[d] *
// factor; rows whose source is null and columns past head_size get zeros, so products with them
// are exactly zero (never NaN from stale shared memory).
template <typename T, int kHeadSize, bool kExact, int kThreads, int kRows, typename RowSource>
__device__ __forceinline__ void load_tile(float* tile, int stride, int head_size, float factor,
                                          RowSource row_source) {
  if constexpr (kExact) {
    constexpr int E = kPackElements<T>;
    constexpr int kPacksPerRow = kHeadSize / E;
    static_assert(kHeadSize % E == 0 && E % 4 == 0);
    constexpr int kPacks = kRows * kPacksPerRow;
    // A compile-time trip count lets the compiler issue all of a thread's loads before its stores.
#pragma unroll
    for (int k = 0; k < (kPacks + kThreads - 1) / kThreads; ++k) {
      const int i = k * kThreads + static_cast<int>(threadIdx.x);
      if (kPacks % kThreads != 0 && i >= kPacks) break;
      const int row = i / kPacksPerRow;
      const int pack = i % kPacksPerRow;
      const T* source = row_source(row);
      float values[E];
      if (source != nullptr) {
        const Pack<T, E> loaded = load_pack<E>(source + pack * E);
#pragma unroll
        for (int e = 0; e < E; ++e) values[e] = to_float(loaded.values[e]) * factor;
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) values[e] = 0.0f;
      }
      float4* target = reinterpret_cast<float4*>(tile + row * stride + pack * E);
#pragma unroll
      for (int q = 0; q < E / 4; ++q) {
        target[q] =
            make_float4(values[4 * q], values[4 * q + 1], values[4 * q + 2], values[4 * q + 3]);
      }
    }
  } else {
    const int padded = round_up_to_4(head_size);
    for (int i = threadIdx.x; i < kRows * padded; i += kThreads) {
      const int row = i / padded;
      const int d = i % padded;
      const T* source = row_source(row);
      tile[row * stride + d] =
          source != nullptr && d < head_size ? to_float(source[d]) * factor : 0.0f;
    }
  }
}

// Stores 4 consecutive f32 values of an output row as T: one packed store when exact, else
// element by element up to head_size.
template <bool kExact, typename T>
__device__ __forceinline__ void store_four(T* row, int d, int head_size, float4 value) {
  const float values[4] = {value.x, value.y, value.z, value.w};
  if constexpr (kExact) {
    Pack<T, 4> pack;
#pragma unroll
    for (int e = 0; e < 4; ++e) pack.values[e] = from_compute<T>(values[e]);
    store_pack<4>(row + d, pack);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (d + e < head_size) row[d + e] = from_compute<T>(values[e]);
    }
  }
}

__device__ __forceinline__ float4 scaled(float4 value, float factor) {
  return make_float4(value.x * factor, value.y * factor, value.z * factor, value.w * factor);
}

// acc += weight * value, component-wise.
__device__ __forceinline__ void add_scaled(float4& acc, float weight, float4 value) {
  acc.x = fmaf(weight, value.x, acc.x);
  acc.y = fmaf(weight, value.y, acc.y);
  acc.z = fmaf(weight, value.z, acc.z);
  acc.w = fmaf(weight, value.w, acc.w);
}

__device__ __forceinline__ float dot4(float4 a, float4 b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}

}  // namespace tessera::gpu::attention
