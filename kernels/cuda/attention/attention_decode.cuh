// The decode attention kernels (every sequence has at most one new token), flash-decoding style,
// on CUDA cores: f32, head sizes other than 64 and 128, GQA groups over 16, and HIP. bf16/f16
// with heads of 64 or 128 take the tensor-core kernel of attention_decode_mma.cuh, which splits
// keys into the same partitions (partition_keys) and leaves the same partial results for the
// combine kernel below.
//
// A block handles one (kv head, sequence, partition) for a chunk of the kv head's GQA group of q
// heads, so each K/V row is read from memory once per group, not once per q head. A sequence's
// keys are split into `num_partitions` contiguous partitions (the grid's z) when sequences x kv
// heads alone would leave SMs idle; the partition size is derived per sequence from its own
// length (ceil(seq_len / num_partitions), rounded up to the tile), so any length is covered by
// the launched partitions whatever max_seq_len the host used to choose their number (a captured
// graph stays correct as sequences grow). With one partition the block writes the output; with
// more it writes its unnormalized accumulator, running max and sum, and the combine kernel merges
// them (out = sum_p 2^(m_p - M) acc_p / sum_p 2^(m_p - M) l_p). With a sliding window the
// partitions split only the keys inside it; scores are softcapped (when asked).
//
// The step's new K/V rows need no launch of their own (when the launch passes them): one block
// per (kv head, sequence) stores them into the cache as it ends (exact heads load them as it
// starts, one 16-byte pack per thread; generic heads copy them at the end), and every block
// reads the new key and value from the step's rows wherever a key's slot is the new token's, so
// no block reads that slot from the cache and none waits for the store. A new token's slot lies
// in its own sequence's blocks only, as the model runner assigns them.
//
// Per tile of kDecodeTile keys:
//  1. V rows are gathered into shared memory (f32) while
//  2. scores are computed with kTokenLanes lanes per key: each lane holds a quarter of the key
//     row in registers and dots it with every q head of the chunk (q in shared memory, where the
//     lanes of equal quarter read the same address: a broadcast), then 2 shuffles sum the
//     quarters;
//  3. one warp per head updates the online softmax (max, exp2, sum) over the tile;
//  4. p @ V: a thread owns (head, 4 output columns) pairs, and when there are fewer pairs than
//     threads, R threads share a pair and split the tile's keys; their partial sums are combined
//     with shuffles at the end.
#pragma once

#include <cmath>

#include "kernels/cuda/attention/attention_common.cuh"

namespace tessera::gpu::attention {

constexpr int kDecodeThreads = 128;
constexpr int kDecodeTile = 64;                             // keys per softmax step
constexpr int kTokenLanes = 4;                              // lanes sharing one key row
constexpr int kKeysPerPass = kDecodeThreads / kTokenLanes;  // keys scored at once
constexpr int kMaxPairsPerThread = 4;                       // (head, column group) pairs
constexpr int kMaxPairsPerBlock = kDecodeThreads * kMaxPairsPerThread;
constexpr int kMaxPartitions = 256;  // the combine kernel's limit
constexpr int kCombineThreads = 128;

// How a decode launch is split: q heads per block (a chunk of a GQA group), chunks per group,
// partitions per sequence, and the workspace for partial results when num_partitions > 1.
struct DecodeSplit {
  int heads_per_block;
  int head_chunks;
  int num_partitions;       // blocks per (sequence, kv head); the combine kernel merges them
  float* partial_acc;       // [num_seqs, num_heads, num_partitions, padded head] unnormalized
  float* partial_max;       // [num_seqs, num_heads, num_partitions] running max (exp2 domain)
  float* partial_sum;       // [num_seqs, num_heads, num_partitions] running sum
  int warps_per_block = 1;  // the tensor-core kernel's partitions per block (merged in it)
  int tile_buffers = 2;     // the tensor-core kernel's K/V tile buffers per warp
};

__host__ __device__ constexpr int decode_value_stride(int padded_head) {
  return padded_head + 4;  // rows of subsets sharing a pair start on different banks
}

// Dynamic shared memory of the decode kernel: q rows, scores, softmax state, the v tile.
inline size_t decode_shared_bytes(int head_size, int heads_per_block) {
  const int padded = round_up_to_4(head_size);
  return sizeof(float) * (static_cast<size_t>(heads_per_block) * (padded + kDecodeTile + 3) +
                          static_cast<size_t>(kDecodeTile) * decode_value_stride(padded));
}

// The keys [begin, end) that partition `partition` of `partitions` covers in a sequence of
// `seq_len` keys: the keys inside its window, split into whole kDecodeTile tiles (partitions past
// the last key are empty).
struct KeyRange {
  int begin;
  int end;
};
__device__ __forceinline__ KeyRange partition_keys(int seq_len, int sliding_window, int partition,
                                                   int partitions) {
  const int first_key = window_first_key(seq_len - 1, sliding_window);
  const int per_partition = (seq_len - first_key + partitions - 1) / partitions;
  const int partition_size = (per_partition + kDecodeTile - 1) / kDecodeTile * kDecodeTile;
  const int begin = first_key + partition * partition_size;
  return {begin, min(seq_len, begin + partition_size)};
}

// Grid: x = kv heads x head chunks, y = sequences, z = partitions.
template <typename T, typename C, int kHeadSize, bool kExact>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_attention_kernel(AttentionParams<T, C> params, DecodeSplit split) {
  extern __shared__ float4 decode_shared[];
  wait_for_prior_grids();
  allow_next_grid();
  const int seq = static_cast<int>(blockIdx.y);
  const int partition = static_cast<int>(blockIdx.z);
  const int kv_head = static_cast<int>(blockIdx.x) / split.head_chunks;
  const int chunk = static_cast<int>(blockIdx.x) % split.head_chunks;
  const int token = params.query_start_loc[seq];
  if (params.query_start_loc[seq + 1] == token) return;  // no new token for this sequence
  const int tid = static_cast<int>(threadIdx.x);
  const int head_size = kExact ? kHeadSize : params.head_size;

  // The new K/V rows of this kv head (none when the launch wrote the cache first), and whether
  // this block stores them: exact heads stage one 16-byte pack per thread now, for the end.
  const NewRows<T> new_rows = step_rows(params, token, kv_head, head_size);
  const int64_t new_slot = new_rows.slot;
  const T* new_key_row = new_rows.key;
  const T* new_value_row = new_rows.value;
  const int64_t kv_width = static_cast<int64_t>(params.num_kv_heads) * head_size;
  const bool writes_cache =
      chunk == 0 && partition == 0 && new_slot >= 0 && new_slot < params.num_slots;
  constexpr int E = kPackElements<T>;
  constexpr int kRowPacks = kExact ? kHeadSize / E : 1;
  static_assert(2 * kRowPacks <= kDecodeThreads, "a thread stages at most one pack of the rows");
  const bool stages = kExact && writes_cache && tid < 2 * kRowPacks;
  const int staged_element = (tid % kRowPacks) * E;
  const bool staged_value = tid >= kRowPacks;
  Pack<T, E> staged{};
  if (stages) staged = load_pack<E>((staged_value ? new_value_row : new_key_row) + staged_element);

  const int group = params.num_heads / params.num_kv_heads;
  const int first_head = kv_head * group + chunk * split.heads_per_block;
  const int heads = min(split.heads_per_block, group - chunk * split.heads_per_block);
  const KeyRange keys =
      partition_keys(params.seq_lens[seq], params.sliding_window, partition, split.num_partitions);
  const int begin = keys.begin;
  const int end = keys.end;

  const int padded = padded_head_size<kHeadSize, kExact>(head_size);
  const int value_stride = decode_value_stride(padded);
  // The float4-read arrays first, at offsets that are multiples of 4 floats.
  float* v_tile = reinterpret_cast<float*>(decode_shared);  // [kDecodeTile][value_stride]
  float* q_rows = v_tile + kDecodeTile * value_stride;      // [heads_per_block][padded]
  float* scores = q_rows + split.heads_per_block * padded;  // [heads_per_block][kDecodeTile]
  float* running_max = scores + split.heads_per_block * kDecodeTile;
  float* running_sum = running_max + split.heads_per_block;
  float* correction = running_sum + split.heads_per_block;

  const int64_t query_width = static_cast<int64_t>(params.num_heads) * head_size;
  const int32_t* block_table =
      params.block_tables + static_cast<int64_t>(seq) * params.max_blocks_per_seq;
  // The K or V row of a key position: the step's own row for the new token's slot (a cache of
  // T only: an FP8 cache was written before the launch).
  auto cached_row = [&](const C* cache, const T* new_row, int position) -> const C* {
    const int64_t slot = cache_slot(params, block_table, position);
    if constexpr (std::is_same_v<C, T>) {
      if (new_slot >= 0 && slot == new_slot) return new_row;
    }
    return cache + (slot * params.num_kv_heads + kv_head) * head_size;
  };

  // q rows of the chunk's heads (as many rows as the largest chunk; unused ones are zeros).
  {
    const T* query_row = params.query + token * params.query_row_stride;
    const int padded_elements = split.heads_per_block * padded;
    for (int i = tid; i < padded_elements; i += kDecodeThreads) {
      const int g = i / padded;
      const int d = i % padded;
      q_rows[i] = g < heads && d < head_size
                      ? to_float(query_row[static_cast<int64_t>(first_head + g) * head_size + d]) *
                            params.scale_log2
                      : 0.0f;
    }
  }
  if (tid < heads) {
    running_max[tid] = -INFINITY;
    running_sum[tid] = 0.0f;
  }

  // (head, column group) pairs of the p @ V step and the threads sharing each.
  const int column_groups = padded / 4;
  const int pairs = heads * column_groups;
  int sharing = 1;  // R: a power of two up to 32, so sharers are lanes of one warp
  while (sharing < 32 && pairs * sharing * 2 <= kDecodeThreads) sharing *= 2;
  const int pair_stride = kDecodeThreads / sharing;
  const int first_pair = tid / sharing;
  const int subset = tid % sharing;
  float4 acc[kMaxPairsPerThread];
#pragma unroll
  for (int k = 0; k < kMaxPairsPerThread; ++k) acc[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  const int lane_in_key = tid % kTokenLanes;
  const int key_in_pass = tid / kTokenLanes;
  constexpr int kElementsPerLane = kHeadSize / kTokenLanes;

  for (int tile_begin = begin; tile_begin < end; tile_begin += kDecodeTile) {
    const int tile_keys = min(kDecodeTile, end - tile_begin);
    __syncthreads();  // q rows and softmax state visible; the previous tile's readers done
    load_tile<C, kHeadSize, kExact, kDecodeThreads, kDecodeTile>(
        v_tile, value_stride, head_size, 1.0f, [&](int row) -> const C* {
          if (row >= tile_keys) return nullptr;
          return cached_row(params.value_cache, new_value_row, tile_begin + row);
        });

    // Scores: lane l of a key holds elements of its quarter (packs l, l + 4, ... when exact).
#pragma unroll
    for (int pass = 0; pass < kDecodeTile / kKeysPerPass; ++pass) {
      const int key = pass * kKeysPerPass + key_in_pass;
      const bool valid = key < tile_keys;
      const C* key_row =
          valid ? cached_row(params.key_cache, new_key_row, tile_begin + key) : nullptr;
      float k[kElementsPerLane];
      if constexpr (kExact) {
        constexpr int E = kPackElements<T>;
        constexpr int kPacksPerLane = kHeadSize / E / kTokenLanes;
#pragma unroll
        for (int j = 0; j < kPacksPerLane; ++j) {
          const int element = (lane_in_key + kTokenLanes * j) * E;
          if (valid) {
            const Pack<C, E> pack = load_pack<E>(key_row + element);
#pragma unroll
            for (int e = 0; e < E; ++e) k[j * E + e] = to_float(pack.values[e]);
          } else {
#pragma unroll
            for (int e = 0; e < E; ++e) k[j * E + e] = 0.0f;
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < kElementsPerLane; ++j) {
          const int element = lane_in_key + kTokenLanes * j;
          k[j] = valid && element < head_size ? to_float(key_row[element]) : 0.0f;
        }
      }
      for (int g = 0; g < heads; ++g) {
        const float* q = q_rows + g * padded;
        float dot = 0.0f;
        if constexpr (kExact) {
          constexpr int E = kPackElements<T>;
#pragma unroll
          for (int j = 0; j < kHeadSize / E / kTokenLanes; ++j) {
            const int element = (lane_in_key + kTokenLanes * j) * E;
#pragma unroll
            for (int e = 0; e < E; e += 4) {
              const float4 q4 = *reinterpret_cast<const float4*>(q + element + e);
              dot = dot4(
                  q4,
                  make_float4(k[j * E + e], k[j * E + e + 1], k[j * E + e + 2], k[j * E + e + 3]),
                  dot);
            }
          }
        } else {
#pragma unroll
          for (int j = 0; j < kElementsPerLane; ++j) {
            const int element = lane_in_key + kTokenLanes * j;
            if (element < padded) dot = fmaf(q[element], k[j], dot);
          }
        }
        dot += GPU_SHFL_XOR(dot, 1);
        dot += GPU_SHFL_XOR(dot, 2);
        if (lane_in_key == 0)
          scores[g * kDecodeTile + key] =
              valid ? softcap_score(dot, params.softcap_log2) : -INFINITY;
      }
    }
    __syncthreads();

    // Online softmax over the tile, one warp per head.
    const int warp = tid / GPU_WARP_SIZE;
    const int lane = tid % GPU_WARP_SIZE;
    for (int g = warp; g < heads; g += kDecodeThreads / GPU_WARP_SIZE) {
      float* row = scores + g * kDecodeTile;
      float tile_max = -INFINITY;
      for (int key = lane; key < kDecodeTile; key += GPU_WARP_SIZE)
        tile_max = fmaxf(tile_max, row[key]);
      tile_max = group_reduce<FloatMax, GPU_WARP_SIZE>(tile_max);
      const float old_max = running_max[g];
      const float new_max = fmaxf(old_max, tile_max);  // finite: the tile's first key is valid
      float tile_sum = 0.0f;
      for (int key = lane; key < kDecodeTile; key += GPU_WARP_SIZE) {
        const float probability = exp2f(row[key] - new_max);
        row[key] = probability;
        tile_sum += probability;
      }
      tile_sum = group_reduce<FloatSum, GPU_WARP_SIZE>(tile_sum);
      // Every lane has read running_max[g] before lane 0 replaces it (a barrier racecheck sees;
      // the shuffles above order it too, but only by the warp's convergence).
      GPU_SYNCWARP();
      if (lane == 0) {
        const float factor = exp2f(old_max - new_max);  // 0 on the first tile
        correction[g] = factor;
        running_max[g] = new_max;
        running_sum[g] = running_sum[g] * factor + tile_sum;
      }
    }
    __syncthreads();

    // acc = acc * correction + p @ V for this thread's pairs and its share of the keys.
#pragma unroll
    for (int k = 0; k < kMaxPairsPerThread; ++k) {
      const int pair = first_pair + k * pair_stride;
      if (pair >= pairs) break;
      const int g = pair / column_groups;
      const int column = 4 * (pair % column_groups);
      acc[k] = scaled(acc[k], correction[g]);
      const float* probabilities = scores + g * kDecodeTile;
      for (int key = subset; key < tile_keys; key += sharing) {
        add_scaled(acc[k], probabilities[key],
                   *reinterpret_cast<const float4*>(v_tile + key * value_stride + column));
      }
    }
  }
  __syncthreads();  // the final softmax state is visible to every thread

  // The new K/V rows into the cache, off the path of everything above.
  const int64_t cache_offset = new_slot * kv_width + static_cast<int64_t>(kv_head) * head_size;
  if constexpr (std::is_same_v<C, T>) {
    if (stages) {
      store_pack<E>(
          (staged_value ? params.value_cache : params.key_cache) + cache_offset + staged_element,
          staged);
    } else if (!kExact && writes_cache) {
      for (int i = tid; i < 2 * head_size; i += kDecodeThreads) {
        const bool value = i >= head_size;
        (value ? params.value_cache : params.key_cache)[cache_offset + i % head_size] =
            (value ? new_value_row : new_key_row)[i % head_size];
      }
    }
  }

  const bool split_keys = split.num_partitions > 1;
#pragma unroll
  for (int k = 0; k < kMaxPairsPerThread; ++k) {
    const int pair = first_pair + k * pair_stride;
    float4 value = acc[k];
    for (int mask = sharing / 2; mask > 0; mask /= 2) {  // uniform: every lane shuffles
      value.x += GPU_SHFL_XOR(value.x, mask);
      value.y += GPU_SHFL_XOR(value.y, mask);
      value.z += GPU_SHFL_XOR(value.z, mask);
      value.w += GPU_SHFL_XOR(value.w, mask);
    }
    if (pair >= pairs || subset != 0) continue;
    const int g = pair / column_groups;
    const int column = 4 * (pair % column_groups);
    const int head = first_head + g;
    if (split_keys) {
      const int64_t slot =
          (static_cast<int64_t>(seq) * params.num_heads + head) * split.num_partitions + partition;
      *reinterpret_cast<float4*>(split.partial_acc + slot * padded + column) = value;
    } else {
      const float sum = running_sum[g];
      T* out_row = params.out + token * query_width + static_cast<int64_t>(head) * head_size;
      store_four<kExact>(out_row, column, head_size,
                         scaled(value, sum > 0.0f ? params.value_scale / sum : 0.0f));
    }
  }
  if (split_keys && tid < heads) {
    const int64_t slot =
        (static_cast<int64_t>(seq) * params.num_heads + first_head + tid) * split.num_partitions +
        partition;
    split.partial_max[slot] = running_max[tid];
    split.partial_sum[slot] = running_sum[tid];
  }
}

// Merges the partitions of each (sequence, q head). Grid: x = q heads, y = sequences.
template <typename T, typename C>
__global__ void __launch_bounds__(kCombineThreads)
    combine_partitions_kernel(AttentionParams<T, C> params, DecodeSplit split) {
  __shared__ float weights[kMaxPartitions];
  __shared__ float scratch[kCombineThreads / GPU_WARP_SIZE];
  wait_for_prior_grids();
  allow_next_grid();
  const int head = static_cast<int>(blockIdx.x);
  const int seq = static_cast<int>(blockIdx.y);
  const int token = params.query_start_loc[seq];
  if (params.query_start_loc[seq + 1] == token) return;
  const int partitions = split.num_partitions;
  const int64_t first_slot = (static_cast<int64_t>(seq) * params.num_heads + head) * partitions;
  const int tid = static_cast<int>(threadIdx.x);

  float local_max = -INFINITY;
  for (int p = tid; p < partitions; p += kCombineThreads)
    local_max = fmaxf(local_max, split.partial_max[first_slot + p]);
  const float global_max = block_reduce<FloatMax, kCombineThreads>(local_max, scratch);
  float local_sum = 0.0f;
  for (int p = tid; p < partitions; p += kCombineThreads) {
    const float sum = split.partial_sum[first_slot + p];
    // Empty partitions (short sequences) have sum 0 and max -inf: weight 0, never NaN.
    const float weight = sum > 0.0f ? exp2f(split.partial_max[first_slot + p] - global_max) : 0.0f;
    weights[p] = weight;
    local_sum += weight * sum;
  }
  const float total = block_reduce<FloatSum, kCombineThreads>(local_sum, scratch);
  const float inverse = total > 0.0f ? params.value_scale / total : 0.0f;

  const int head_size = params.head_size;
  const int padded = round_up_to_4(head_size);
  T* out_row = params.out + token * static_cast<int64_t>(params.num_heads) * head_size +
               static_cast<int64_t>(head) * head_size;
  for (int d = tid; d < head_size; d += kCombineThreads) {
    float value = 0.0f;
    for (int p = 0; p < partitions; ++p)
      value = fmaf(weights[p], split.partial_acc[(first_slot + p) * padded + d], value);
    out_row[d] = from_compute<T>(value * inverse);
  }
}

}  // namespace tessera::gpu::attention
