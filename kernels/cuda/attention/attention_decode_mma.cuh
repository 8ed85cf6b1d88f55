// The decode attention kernel on tensor cores (CUDA sm_80+; bf16 and f16, head size 64 or 128,
// GQA groups of at most 16 q heads): the same grid semantics, partitions, new-row handling and
// partial results as the CUDA-core decode kernel of attention_decode.cuh, which the other cases
// keep.
//
// Why: at decode each sequence has one query row per q head, so the CUDA-core kernel scores and
// sums with scalar FMAs and shared-memory broadcasts: many instructions per key, and its
// registers limit its occupancy (docs/performance.md "Decode attention"). Here one warp handles
// one (kv head, sequence, partition): the q heads of the kv head's group are the 16 rows of the
// mma A fragment (rows past the group are zeros), and each 32-key tile costs 2 x kHeadSize / 16
// x 4 mma, as in the prefill kernel (attention_prefill_mma.cuh):
//   - K and V tiles are gathered through the block table into shared memory with cp.async,
//     kDecodeMmaMinBuffers to kDecodeMmaMaxBuffers per warp (split.tile_buffers: the host takes
//     the most that keep the whole launch resident); each lane finds the cache row of one key of
//     the tile and the warp shares them with shuffles (one block-table lookup per key); with a
//     cache of the model's dtype the step's new token's key and value come from the step's rows,
//     never from the cache (attention_decode.cuh says why); an FP8 cache's codes (written
//     before the launch) arrive the same way into tiles of codes, which the f16 fragments read
//     directly (attention_mma_codes.cuh);
//   - S = Q K^T from ldmatrix'd K, the online softmax on the accumulators, O += P V from
//     ldmatrix.trans'd V;
//   - with a cache of the model's dtype, partition 0's warp stores the step's new K/V rows into
//     the cache as it ends;
//   - for rotary_attention (params.rope_cos_sin set) the query is rotated in its A fragments, and
//     the step's key in its tile row and as it is cached (attention_rope.cuh): no rope launch;
//   - the tiles before the step's own key are cache rows of earlier steps, so the first ones
//     (a buffer's worth each) are requested before the kernel waits for the one before it
//     (programmatic launch): their latency overlaps that kernel's tail;
//   - up to kDecodeMmaMaxWarps partitions of one (kv head, sequence) are the warps of one block
//     (fewer where their tiles would not fit the shared memory a block may take) and merge
//     through shared memory as they end. With at most that many partitions (the 1B model's
//     shapes at short contexts) there is no combine kernel to launch and wait
//     for (docs/performance.md "Decode attention").
#pragma once

#include "kernels/cuda/gpu_vendor.h"

#if !defined(TESSERA_GPU_HIP)

#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention/attention_common.cuh"
#include "kernels/cuda/attention/attention_decode.cuh"
#include "kernels/cuda/attention/attention_mma_codes.cuh"
#include "kernels/cuda/attention/attention_mma_tile.cuh"
#include "kernels/cuda/attention/attention_rope.cuh"
#include "kernels/cuda/attention/decode_layout.h"
#include "kernels/cuda/mma.cuh"

namespace tessera::gpu::attention {

constexpr int kDecodeMmaThreads = 32;   // per warp
constexpr int kDecodeMmaKeyTile = 32;   // keys per tile (a lane finds one key's row)
constexpr int kDecodeMmaMaxGroup = 16;  // q heads per kv head: the A fragment's rows

template <int kHeadSize>
inline constexpr int kDecodeMmaStride = kHeadSize + 8;  // padded: ldmatrix rows on distinct banks

// `buffers` buffers of a K tile and a V tile, per warp: of T, or of an FP8 cache's codes (C is
// not T), which the mma fragments read directly (attention_mma_tile.cuh).
template <typename T, typename C, int kHeadSize>
constexpr size_t decode_mma_shared_bytes_per_warp(int buffers) {
  const size_t key_and_value_row_bytes =
      std::is_same_v<C, T> ? 2 * kDecodeMmaStride<kHeadSize> * sizeof(T)
                           : kKeyCodeStride<kHeadSize> + kValueCodeStride<kHeadSize>;
  return static_cast<size_t>(buffers) * kDecodeMmaKeyTile * key_and_value_row_bytes;
}

// Grid: x = kv heads / kKvHeadsPerWarp, y = sequences, z = partitions; split.warps_per_block
// warps per block, each its own partition of the keys (partition z * warps + warp), merged
// through shared memory at the end, so that a short context needs no combine kernel. With an FP8
// cache and heads of 64 a warp may take two adjacent kv heads (kKvHeadsPerWarp 2: tile rows of
// 128 codes, attention_mma_codes.cuh says why).
template <typename T, typename C, int kHeadSize, int kKvHeadsPerWarp = 1>
__global__ void __launch_bounds__(kDecodeMmaThreads* kDecodeMmaMaxWarps)
    decode_attention_mma_kernel(AttentionParams<T, C> params, DecodeSplit split) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // the host dispatches here only on sm_80+
#else
  static_assert(kHeadSize % 16 == 0 && sizeof(T) == 2);
  constexpr bool kFloat8 = !std::is_same_v<C, T>;
  static_assert(kKvHeadsPerWarp == 1 || (kFloat8 && kKvHeadsPerWarp == 2 && kHeadSize == 64));
  constexpr int kRowWidth = kHeadSize * kKvHeadsPerWarp;  // of a tile's rows and the fragments
  constexpr int kStride = kDecodeMmaStride<kHeadSize>;
  constexpr int kTileElements = kDecodeMmaKeyTile * kStride;
  constexpr int kSteps = kRowWidth / 16;             // k steps of S = Q K^T
  constexpr int kKeyGroups = kDecodeMmaKeyTile / 8;  // n tiles of S
  constexpr int kOutGroups = kRowWidth / 8;          // n tiles of O
  constexpr int kChunksPerRow = kHeadSize / 8;       // 16-byte chunks of a K/V row
  constexpr int kRowsPerPass = kDecodeMmaThreads / kChunksPerRow;
  extern __shared__ uint4 decode_mma_shared[];
  const int warp = static_cast<int>(threadIdx.x) / kDecodeMmaThreads;
  const int warps = split.warps_per_block;
  const int buffers = split.tile_buffers;
  // This warp's [buffer][K, V][key][kStride] of T, or [buffer] of a K tile of codes
  // ([key][kKeyCodeStride] bytes) and a V tile ([key][kValueCodeStride] bytes).
  constexpr int kKeyCodeTile = kDecodeMmaKeyTile * kKeyCodeStride<kRowWidth>;  // bytes
  constexpr int kCodeBuffer = kKeyCodeTile + kDecodeMmaKeyTile * kValueCodeStride<kRowWidth>;
  const size_t warp_bytes = decode_mma_shared_bytes_per_warp<T, C, kRowWidth>(buffers);
  char* warp_shared = reinterpret_cast<char*>(decode_mma_shared) + warp * warp_bytes;
  T* tiles = reinterpret_cast<T*>(warp_shared);
  [[maybe_unused]] uint8_t* codes = reinterpret_cast<uint8_t*>(warp_shared);

  // Before the wait only what the host or an earlier step wrote is read: the metadata and the
  // cached keys of earlier tokens (the kernel before this one writes the step's rows).
  const int kv_head = static_cast<int>(blockIdx.x) * kKvHeadsPerWarp;  // the warp's first
  const int seq = static_cast<int>(blockIdx.y);
  const int partition = static_cast<int>(blockIdx.z) * warps + warp;  // of the keys
  const int token = params.query_start_loc[seq];
  const bool has_token = params.query_start_loc[seq + 1] != token;
  const int lane = static_cast<int>(threadIdx.x) % kDecodeMmaThreads;
  const int group = lane / 4;      // the fragment row (and B column) of this lane
  const int quad_lane = lane % 4;  // the fragment column pair of this lane

  const int64_t kv_width = static_cast<int64_t>(params.num_kv_heads) * kHeadSize;
  const NewRows<T> new_rows =
      has_token ? step_rows(params, token, kv_head, kHeadSize) : NewRows<T>{};

  const int heads = params.num_heads / params.num_kv_heads;  // of a kv head's group
  const int warp_heads = heads * kKvHeadsPerWarp;            // <= kDecodeMmaMaxGroup
  const int first_head = kv_head * heads;
  // Partitions as the CUDA-core kernel splits them.
  const KeyRange keys = partition_keys(params.seq_lens[seq], params.sliding_window, partition,
                                       split.num_partitions * warps);
  const int begin = keys.begin;
  const int end = keys.end;
  const int32_t* block_table =
      params.block_tables + static_cast<int64_t>(seq) * params.max_blocks_per_seq;

  // Starts the gather of the tile from key `tile_begin` into `buffer`. Lane l finds the row of
  // key tile_begin + l: its element offset in the cache, -1 for the step's own row, -2 past the
  // keys; each lane then copies chunks of kRowsPerPass rows per pass.
  auto load_tile_async = [&](int tile_begin, int buffer) {
    T* k_tile = tiles + buffer * 2 * kTileElements;
    T* v_tile = k_tile + kTileElements;
    int64_t my_offset = -2;
    if (tile_begin + lane < end) {
      const int64_t slot = cache_slot(params, block_table, tile_begin + lane);
      my_offset = new_rows.slot >= 0 && slot == new_rows.slot
                      ? -1
                      : (slot * params.num_kv_heads + kv_head) * kHeadSize;
    }
    const int column = lane % kChunksPerRow * 8;
    constexpr int kPasses = kDecodeMmaKeyTile / kRowsPerPass;
    if constexpr (std::is_same_v<C, T>) {
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
        const int row = pass * kRowsPerPass + lane / kChunksPerRow;
        const int64_t offset = __shfl_sync(0xffffffffu, my_offset, row);
        const bool valid = offset != -2;
        const T* key_source = offset >= 0    ? params.key_cache + offset + column
                              : offset == -1 ? new_rows.key + column
                                             : params.key_cache;
        const T* value_source = offset >= 0    ? params.value_cache + offset + column
                                : offset == -1 ? new_rows.value + column
                                               : params.value_cache;
        copy_async_16(k_tile + row * kStride + column, key_source, valid);
        copy_async_16(v_tile + row * kStride + column, value_source, valid);
      }
    } else {  // an FP8 cache, written before the launch: every row's codes from the cache
      uint8_t* k_codes = codes + buffer * kCodeBuffer;
      uint8_t* v_codes = k_codes + kKeyCodeTile;
      constexpr int kCodeChunksPerRow = kRowWidth / 16;  // 16-byte chunks of a row of codes
      constexpr int kCodeRowsPerPass = kDecodeMmaThreads / kCodeChunksPerRow;
      const int code_column = lane % kCodeChunksPerRow * 16;
#pragma unroll
      for (int pass = 0; pass < kDecodeMmaKeyTile / kCodeRowsPerPass; ++pass) {
        const int row = pass * kCodeRowsPerPass + lane / kCodeChunksPerRow;
        const int64_t offset = __shfl_sync(0xffffffffu, my_offset, row);
        const int64_t at = offset >= 0 ? offset + code_column : 0;
        copy_async_16(k_codes + row * kKeyCodeStride<kRowWidth> + code_column,
                      params.key_cache + at, offset >= 0);
        copy_async_16(v_codes + row * kValueCodeStride<kRowWidth> + code_column,
                      params.value_cache + at, offset >= 0);
      }
    }
    copy_async_commit();
  };
  // Tiles are loaded in order into the buffers in turn. Those wholly before the step's own key
  // (the last, seq_len - 1) are cache rows of earlier steps, so up to one per buffer load before
  // the wait, overlapping the kernel before; that needs this kernel to write the step's rows
  // itself (slot_mapping set): otherwise reshape_and_cache, just before, writes the cache.
  int next_load = begin;  // the first key of the next tile to load
  auto load_next_tile = [&] {
    load_tile_async(next_load, ((next_load - begin) / kDecodeMmaKeyTile) % buffers);
    next_load += kDecodeMmaKeyTile;
  };
  const int step_key = params.slot_mapping != nullptr ? params.seq_lens[seq] - 1 : begin;
  while (has_token && next_load < end && next_load + kDecodeMmaKeyTile <= step_key &&
         next_load < begin + buffers * kDecodeMmaKeyTile)
    load_next_tile();
  wait_for_prior_grids();
  allow_next_grid();
  if (!has_token) return;  // no new token for this sequence

  // The warp's q heads as A fragment rows (group and group + 8); rows past them are zeros.
  const int64_t query_width = static_cast<int64_t>(params.num_heads) * kHeadSize;
  const T* query_row = params.query + token * params.query_row_stride;
  auto head_row = [&](int row) {
    return query_row + static_cast<int64_t>(first_head + row) * kHeadSize;
  };
  uint32_t q_fragments[kSteps][4];
  float score_scale_log2 = params.scale_log2;
  // An FP8 cache's fragments are f16 in the code layout (attention_mma_codes.cuh): the lane's
  // columns of a row lie in one kv head's (`segment`) and are zeros in the other kv head's rows;
  // the query is scaled into f16's range and the scores by the factor.
  [[maybe_unused]] const int segment = code_output_column<kRowWidth>(lane) / kHeadSize;
  if constexpr (kFloat8) {
    const int column = quad_lane * (kRowWidth / 4) - segment * kHeadSize;
    auto lane_query = [&](int row) -> const T* {
      return row < warp_heads && row / heads == segment ? head_row(row) + column : nullptr;
    };
    score_scale_log2 *= load_code_query_fragments<T, kRowWidth>(lane_query(group),
                                                                lane_query(group + 8), q_fragments);
  } else {
    load_query_fragments(group < heads ? head_row(group) : nullptr,
                         group + 8 < heads ? head_row(group + 8) : nullptr, quad_lane, q_fragments);
  }
  // rotary_attention: the query rotated in registers; the step's key as its tile row arrives and
  // as it is cached (attention_rope.cuh). (Never with an FP8 cache.)
  const RopeRow rope = rope_row(params, token, kHeadSize);
  if constexpr (!kFloat8)
    if (rope.cos_sin != nullptr) rotate_query_fragments<T, kSteps>(q_fragments, quad_lane, rope);
  // The step's own key (the sequence's last), where a tile holds it from the step's rows (its
  // cache slot is the step's; load_tile_async reads every other row from the cache).
  const int last_key = params.seq_lens[seq] - 1;
  const int own_key = rope.cos_sin != nullptr && new_rows.slot >= 0 && last_key >= 0 &&
                              cache_slot(params, block_table, last_key) == new_rows.slot
                          ? last_key
                          : -1;

  float out[kOutGroups][4];
#pragma unroll
  for (int n = 0; n < kOutGroups; ++n) out[n][0] = out[n][1] = out[n][2] = out[n][3] = 0.0f;
  float max_low = -INFINITY, max_high = -INFINITY;
  float sum_low = 0.0f, sum_high = 0.0f;  // this lane's columns; summed over the quad at the end

  for (int tile_begin = begin; tile_begin < end; tile_begin += kDecodeMmaKeyTile) {
    // Every buffer in flight: the tiles up to `buffers` - 1 past this one (the buffer the next
    // takes was read by the tile before this one, done with at the end of its iteration).
    while (next_load < end && next_load < tile_begin + buffers * kDecodeMmaKeyTile)
      load_next_tile();
    // This tile's group is complete; the later ones may be in flight (at most 3: the cases
    // below, which a deeper pipeline would have to extend).
    static_assert(kDecodeMmaMaxBuffers <= 4, "copy_async_wait below takes at most 3 pending");
    switch ((next_load - tile_begin) / kDecodeMmaKeyTile - 1) {
      case 0:
        copy_async_wait<0>();
        break;
      case 1:
        copy_async_wait<1>();
        break;
      case 2:
        copy_async_wait<2>();
        break;
      default:
        copy_async_wait<3>();
        break;
    }
    __syncwarp();  // every lane's copies of this tile are visible
    const int buffer = ((tile_begin - begin) / kDecodeMmaKeyTile) % buffers;
    T* k_tile = tiles + buffer * 2 * kTileElements;
    const T* v_tile = k_tile + kTileElements;
    [[maybe_unused]] const uint8_t* k_codes = codes + buffer * kCodeBuffer;
    if (own_key >= tile_begin && own_key < tile_begin + kDecodeMmaKeyTile && own_key < end) {
      T* row = k_tile + (own_key - tile_begin) * kStride;  // (never with an FP8 cache)
      rotate_key_row<T, kHeadSize>(row, row, lane, rope);
      __syncwarp();
    }

    // S = Q K^T for the group's rows and the tile's keys; scaled into the exp2 domain,
    // softcapped, keys past the partition masked; the softmax; O += P V.
    float scores[kKeyGroups][4];
    if constexpr (kFloat8) {
      score_code_tile<kRowWidth, kKeyGroups>(q_fragments, k_codes, lane, scores);
    } else {
      score_tile<T, kSteps, kKeyGroups, kStride>(q_fragments, k_tile, lane, scores);
    }
#pragma unroll
    for (int n = 0; n < kKeyGroups; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = tile_begin + n * 8 + 2 * quad_lane + (e & 1);
        scores[n][e] = key < end
                           ? softcap_score(scores[n][e] * score_scale_log2, params.softcap_log2)
                           : -INFINITY;
      }
    }
    softmax_tile(scores, max_low, max_high, sum_low, sum_high, out);
    if constexpr (kFloat8) {
      accumulate_code_tile<kRowWidth, kKeyGroups>(scores, k_codes + kKeyCodeTile, lane, out);
    } else {
      accumulate_values<T, kKeyGroups, kOutGroups, kStride>(scores, v_tile, lane, out);
    }
    __syncwarp();  // the buffer is read; the next iteration's copies may overwrite it
  }

  // The new K/V rows into the cache, after this warp's last read of them. (A cache of T: an FP8
  // cache was written before the launch.)
  if constexpr (std::is_same_v<C, T>) {
    if (partition == 0 && new_rows.slot >= 0 && new_rows.slot < params.num_slots) {
      const int64_t cache_offset =
          new_rows.slot * kv_width + static_cast<int64_t>(kv_head) * kHeadSize;
      if (rope.cos_sin != nullptr)
        rotate_key_row<T, kHeadSize>(new_rows.key, params.key_cache + cache_offset, lane, rope);
      for (int chunk = rope.cos_sin != nullptr ? kChunksPerRow + lane : lane;
           chunk < 2 * kChunksPerRow; chunk += kDecodeMmaThreads) {
        const bool value = chunk >= kChunksPerRow;
        const int column = chunk % kChunksPerRow * 8;
        *reinterpret_cast<uint4*>((value ? params.value_cache : params.key_cache) + cache_offset +
                                  column) =
            *reinterpret_cast<const uint4*>((value ? new_rows.value : new_rows.key) + column);
      }
    }
  }

  if (warps > 1) {
    // The block's partitions merged into warp 0's, through each warp's own tile buffers (read
    // for the last time above): per lane its accumulators, then max and sum of both rows.
    constexpr int kValues = kOutGroups * 4 + 4;
    static_assert(kValues * kDecodeMmaThreads * sizeof(float) <=
                  decode_mma_shared_bytes_per_warp<T, C, kRowWidth>(kDecodeMmaMinBuffers));
    float* mine = reinterpret_cast<float*>(warp_shared);
#pragma unroll
    for (int n = 0; n < kOutGroups; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) mine[(n * 4 + e) * kDecodeMmaThreads + lane] = out[n][e];
    const float own[4] = {max_low, max_high, sum_low, sum_high};
#pragma unroll
    for (int i = 0; i < 4; ++i) mine[(kOutGroups * 4 + i) * kDecodeMmaThreads + lane] = own[i];
    __syncthreads();
    if (warp != 0) return;
    auto warp_values = [&](int w) {
      return reinterpret_cast<const float*>(reinterpret_cast<const char*>(decode_mma_shared) +
                                            static_cast<size_t>(w) * warp_bytes);
    };
    float merged_max[2] = {max_low, max_high};
    for (int w = 1; w < warps; ++w)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        merged_max[h] =
            fmaxf(merged_max[h], warp_values(w)[(kOutGroups * 4 + h) * kDecodeMmaThreads + lane]);
    // A partition with no keys (max -inf) weighs nothing.
    auto weight = [&](float max, int h) {
      return max == -INFINITY ? 0.0f : exp2f(max - merged_max[h]);
    };
    float weights[2] = {weight(max_low, 0), weight(max_high, 1)};
#pragma unroll
    for (int n = 0; n < kOutGroups; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) out[n][e] *= weights[e / 2];
    sum_low *= weights[0];
    sum_high *= weights[1];
    for (int w = 1; w < warps; ++w) {
      const float* theirs = warp_values(w);
      weights[0] = weight(theirs[(kOutGroups * 4) * kDecodeMmaThreads + lane], 0);
      weights[1] = weight(theirs[(kOutGroups * 4 + 1) * kDecodeMmaThreads + lane], 1);
#pragma unroll
      for (int n = 0; n < kOutGroups; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          out[n][e] += theirs[(n * 4 + e) * kDecodeMmaThreads + lane] * weights[e / 2];
      sum_low += theirs[(kOutGroups * 4 + 2) * kDecodeMmaThreads + lane] * weights[0];
      sum_high += theirs[(kOutGroups * 4 + 3) * kDecodeMmaThreads + lane] * weights[1];
    }
    max_low = merged_max[0];
    max_high = merged_max[1];
  }

  sum_low = quad_sum(sum_low);
  sum_high = quad_sum(sum_high);
  const bool split_keys = split.num_partitions > 1;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int g = group + 8 * half;
    if (g >= warp_heads) continue;
    const int head = first_head + g;
    const float sum = half == 0 ? sum_low : sum_high;
    // An FP8 cache's lane holds values of its segment's columns: they are the row's where the
    // row's kv head is the segment's.
    [[maybe_unused]] const bool own_values = g / heads == segment;
    [[maybe_unused]] const int code_column =
        code_output_column<kRowWidth>(lane) - segment * kHeadSize;
    if (split_keys) {
      // Unnormalized, with the running max and sum (an empty partition: 0, -inf, 0).
      const int64_t slot =
          (static_cast<int64_t>(seq) * params.num_heads + head) * split.num_partitions +
          static_cast<int64_t>(blockIdx.z);
      float* acc = split.partial_acc + slot * kHeadSize;
      if constexpr (kFloat8) {
        if (own_values) store_code_output_row<kRowWidth>(out, half, 1.0f, acc + code_column);
      } else {
#pragma unroll
        for (int n = 0; n < kOutGroups; ++n)
          *reinterpret_cast<float2*>(acc + n * 8 + 2 * quad_lane) =
              make_float2(out[n][2 * half], out[n][2 * half + 1]);
      }
      if (quad_lane == 0) {
        split.partial_max[slot] = half == 0 ? max_low : max_high;
        split.partial_sum[slot] = sum;
      }
    } else {
      const float inverse = sum > 0.0f ? params.value_scale / sum : 0.0f;
      T* out_row = params.out + token * query_width + static_cast<int64_t>(head) * kHeadSize;
      if constexpr (kFloat8) {
        if (own_values) store_code_output_row<kRowWidth>(out, half, inverse, out_row + code_column);
      } else {
#pragma unroll
        for (int n = 0; n < kOutGroups; ++n)
          *reinterpret_cast<uint32_t*>(out_row + n * 8 + 2 * quad_lane) =
              pack_pair<T>(out[n][2 * half] * inverse, out[n][2 * half + 1] * inverse);
      }
    }
  }
#endif
}

}  // namespace tessera::gpu::attention

#endif  // !TESSERA_GPU_HIP
