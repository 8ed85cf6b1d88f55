// Paged attention on the CPU: writes this step's K/V into the paged cache at slot_mapping, then
// each query token attends causally over its sequence's cached prefix and the new tokens, through
// the block table. GQA: query head h reads kv head h / (num_heads / num_kv_heads). f32 math.
// With a sliding window W a query at position p sees keys p - W + 1 .. p; with a logit softcap C
// the scaled scores become tanh(score / C) * C (Gemma 2), before the softmax. An FP8 cache holds
// e4m3 codes of K / key_scale and V / value_scale (the cache's per-layer scales): key_scale
// multiplies the scores and value_scale the output, so the codes are read as they are.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "runtime/cpu/cpu_features.h"
#ifdef TESSERA_CPU_X86
#include "kernels/quant/avx2_dot.h"
#endif

#include "kernels/attention_metadata.h"
#include "runtime/check.h"
#include "runtime/cpu/parallel.h"
#include "runtime/float8.h"
#include "runtime/kernel_registry.h"

namespace tessera {
namespace {

struct AttentionShape {
  int64_t num_heads, num_kv_heads, head_size, block_size;
  float scale;
  int64_t sliding_window;  // 0: none
  float logit_softcap;     // 0: none
};

// Stores `row` elements of T into the cache's C: copies, or e4m3 codes of source * inverse_scale.
template <typename T, typename C>
void store_row(const T* source, int64_t row, float inverse_scale, C* target) {
  if constexpr (std::is_same_v<C, T>) {
    std::copy(source, source + row, target);
  } else {
    for (int64_t i = 0; i < row; ++i) target[i] = C(static_cast<float>(source[i]) * inverse_scale);
  }
}

template <typename T, typename C>
void write_kv(const T* key, const T* value, PagedKVCache& cache, const AttentionMetadata& meta,
              const AttentionShape& shape) {
  int64_t row = shape.num_kv_heads * shape.head_size;
  C* key_cache = static_cast<C*>(cache.key.data_ptr());
  C* value_cache = static_cast<C*>(cache.value.data_ptr());
  const float key_inverse = 1.0f / cache.key_scale, value_inverse = 1.0f / cache.value_scale;
  int64_t slots = cache.num_blocks() * shape.block_size;
  for (int64_t token = 0; token < meta.num_tokens; ++token) {
    int64_t slot = meta.slot_mapping[token];
    if (slot < 0) continue;
    TESSERA_CHECK(slot < slots, "slot {} past the cache's {} slots", slot, slots);
    store_row(key + token * row, row, key_inverse, key_cache + slot * row);
    store_row(value + token * row, row, value_inverse, value_cache + slot * row);
  }
}

// q . k over a head, in kLanes independent partial sums the compiler keeps in one vector
// register: a single running sum is a chain of dependent adds that cannot be vectorized.
template <typename T>
float head_dot(const float* q, const T* k, int64_t head_size) {
  constexpr int64_t kLanes = 8;
  float partial[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= head_size; d += kLanes)
    for (int64_t lane = 0; lane < kLanes; ++lane)
      partial[lane] += q[d + lane] * static_cast<float>(k[d + lane]);
  float dot = 0;
  for (; d < head_size; ++d) dot += q[d] * static_cast<float>(k[d]);
  for (float value : partial) dot += value;
  return dot;
}

// acc[0, n) += weight * v[0, n).
template <typename T>
void add_scaled(float* acc, float weight, const T* v, int64_t n) {
  for (int64_t d = 0; d < n; ++d) acc[d] += weight * static_cast<float>(v[d]);
}

#ifdef TESSERA_CPU_X86
// The f32 cache's two inner loops in 256-bit FMAs (the files are built for the baseline CPU).
__attribute__((target("avx2,fma"))) float head_dot_avx2(const float* q, const float* k,
                                                        int64_t head_size) {
  __m256 sums[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t d = 0;
  for (; d + 16 <= head_size; d += 16)
    for (int half = 0; half < 2; ++half)
      sums[half] = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8 * half),
                                   _mm256_loadu_ps(k + d + 8 * half), sums[half]);
  if (d + 8 <= head_size) {
    sums[0] = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), sums[0]);
    d += 8;
  }
  float dot = quant::avx2_sum(_mm256_add_ps(sums[0], sums[1]));
  for (; d < head_size; ++d) dot += q[d] * k[d];
  return dot;
}

__attribute__((target("avx2,fma"))) void add_scaled_avx2(float* acc, float weight, const float* v,
                                                         int64_t n) {
  const __m256 scale = _mm256_set1_ps(weight);
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(acc + d,
                     _mm256_fmadd_ps(scale, _mm256_loadu_ps(v + d), _mm256_loadu_ps(acc + d)));
  for (; d < n; ++d) acc[d] += weight * v[d];
}
#endif

// An e4m3 code's value by table: the 256 conversions once instead of bit tests per element.
struct Float8Table {
  float values[256];
  Float8Table() {
    for (int code = 0; code < 256; ++code)
      values[code] = Float8E4M3::to_float(static_cast<uint8_t>(code));
  }
};
const Float8Table& float8_table() {
  static const Float8Table table;
  return table;
}

float head_dot_float8(const float* q, const Float8E4M3* k, int64_t head_size) {
  const float* table = float8_table().values;
  constexpr int64_t kLanes = 8;
  float partial[kLanes] = {};
  int64_t d = 0;
  for (; d + kLanes <= head_size; d += kLanes)
    for (int64_t lane = 0; lane < kLanes; ++lane)
      partial[lane] += q[d + lane] * table[k[d + lane].bits];
  float dot = 0;
  for (; d < head_size; ++d) dot += q[d] * table[k[d].bits];
  for (float value : partial) dot += value;
  return dot;
}

void add_scaled_float8(float* acc, float weight, const Float8E4M3* v, int64_t n) {
  const float* table = float8_table().values;
  for (int64_t d = 0; d < n; ++d) acc[d] += weight * table[v[d].bits];
}

// The inner loops of attend for a cache of T: vectorized for an f32 cache where the CPU can.
template <typename T>
struct RowMath {
  float (*dot)(const float*, const T*, int64_t) = head_dot<T>;
  void (*add_scaled)(float*, float, const T*, int64_t) = tessera::add_scaled<T>;
};

template <typename T>
RowMath<T> row_math() {
  RowMath<T> math;
  if constexpr (std::is_same_v<T, Float8E4M3>) {
    math.dot = head_dot_float8;
    math.add_scaled = add_scaled_float8;
  }
#ifdef TESSERA_CPU_X86
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::cpu_has_avx2_fma()) {
      math.dot = head_dot_avx2;
      math.add_scaled = add_scaled_avx2;
    }
  }
#endif
  return math;
}

// Query heads per work item: the heads of one KV head read each key and value row once for all of
// them (GQA), halved while that leaves fewer than two items per thread.
int64_t heads_per_item(int64_t tokens, int64_t heads, int64_t group) {
  int64_t per_item = group;
  while (per_item % 2 == 0 && tokens * heads / per_item < 2 * cpu::num_threads()) per_item /= 2;
  return per_item;
}

template <typename T, typename C>
void attend(const T* query, const PagedKVCache& cache, const AttentionMetadata& meta,
            const AttentionShape& shape, T* out) {
  const int64_t heads = shape.num_heads, head_size = shape.head_size;
  const int64_t group = heads / shape.num_kv_heads;
  const int64_t kv_row = shape.num_kv_heads * head_size;
  const C* key_cache = static_cast<const C*>(cache.key.data_ptr());
  const C* value_cache = static_cast<const C*>(cache.value.data_ptr());
  const float score_scale = shape.scale * cache.key_scale;
  const int64_t per_item = heads_per_item(meta.num_tokens, heads, group);
  const int64_t items_per_token = heads / per_item;
  static const RowMath<C> math = row_math<C>();
  // Work items: (token, heads first_head .. first_head + per_item), all of one KV head; each finds
  // its sequence by the query start offsets.
  std::vector<int64_t> sequence_of(static_cast<size_t>(meta.num_tokens));
  for (int64_t s = 0; s < meta.num_seqs; ++s)
    for (int64_t t = meta.query_start_loc[s]; t < meta.query_start_loc[s + 1]; ++t)
      sequence_of[t] = s;
  // An item is a whole pass over the context: worth a chunk of its own, so that a decode step's
  // few items split evenly over the threads.
  cpu::parallel_for(meta.num_tokens * items_per_token, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, q(static_cast<size_t>(per_item * head_size)),
        acc(static_cast<size_t>(per_item * head_size));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t token = item / items_per_token;
      const int64_t first_head = (item % items_per_token) * per_item;
      const int64_t kv_head = first_head / group;
      const int64_t s = sequence_of[token];
      const int64_t query_len = meta.query_start_loc[s + 1] - meta.query_start_loc[s];
      const int64_t position = meta.seq_lens[s] - query_len + (token - meta.query_start_loc[s]);
      const int32_t* blocks = meta.block_tables.data() + s * meta.max_blocks_per_seq;
      const T* q_rows = query + (token * heads + first_head) * head_size;
      for (int64_t d = 0; d < per_item * head_size; ++d) q[d] = static_cast<float>(q_rows[d]);
      const int64_t first =
          shape.sliding_window > 0 ? std::max<int64_t>(0, position - shape.sliding_window + 1) : 0;
      const int64_t length = position + 1 - first;
      scores.resize(static_cast<size_t>(per_item * length));  // [head][position]
      // Visits (position, cache slot) for first .. position, a block table lookup per block.
      const auto for_each_position = [&](auto&& visit) {
        for (int64_t p = first; p <= position;) {
          const int64_t block_end =
              std::min(position + 1, (p / shape.block_size + 1) * shape.block_size);
          int64_t slot = static_cast<int64_t>(blocks[p / shape.block_size]) * shape.block_size +
                         p % shape.block_size;
          for (; p < block_end; ++p, ++slot) visit(p, slot);
        }
      };
      for_each_position([&](int64_t p, int64_t slot) {
        const C* k = key_cache + slot * kv_row + kv_head * head_size;
        for (int64_t h = 0; h < per_item; ++h) {
          float score = math.dot(q.data() + h * head_size, k, head_size) * score_scale;
          if (shape.logit_softcap > 0)
            score = std::tanh(score / shape.logit_softcap) * shape.logit_softcap;
          scores[h * length + p - first] = score;
        }
      });
      // Each head's scores become its softmax weights.
      for (int64_t h = 0; h < per_item; ++h) {
        float* row = scores.data() + h * length;
        const float max_score = *std::max_element(row, row + length);
        float total = 0;
        for (int64_t i = 0; i < length; ++i) total += (row[i] = std::exp(row[i] - max_score));
        // The weights carry value_scale (1 unless the cache is FP8).
        for (int64_t i = 0; i < length; ++i) row[i] = row[i] / total * cache.value_scale;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for_each_position([&](int64_t p, int64_t slot) {
        const C* v = value_cache + slot * kv_row + kv_head * head_size;
        for (int64_t h = 0; h < per_item; ++h)
          math.add_scaled(acc.data() + h * head_size, scores[h * length + p - first], v, head_size);
      });
      T* out_rows = out + (token * heads + first_head) * head_size;
      for (int64_t d = 0; d < per_item * head_size; ++d) out_rows[d] = T(acc[d]);
    }
  });
}

// Checks the metadata against the cache before any kernel reads through it.
void check_metadata(const AttentionMetadata& meta, const PagedKVCache& cache, int64_t num_tokens) {
  // Rows past the step's tokens pad the batch up to a captured size: not cached, not attended.
  TESSERA_REQUIRE(meta.num_tokens <= num_tokens,
                  "attention: the step's metadata has {} tokens but the query only {}",
                  meta.num_tokens, num_tokens);
  TESSERA_CHECK(static_cast<int64_t>(meta.query_start_loc.size()) == meta.num_seqs + 1);
  TESSERA_CHECK(static_cast<int64_t>(meta.slot_mapping.size()) == meta.num_tokens);
  for (int64_t s = 0; s < meta.num_seqs; ++s) {
    int64_t query_len = meta.query_start_loc[s + 1] - meta.query_start_loc[s];
    int64_t seq_len = meta.seq_lens[s];
    TESSERA_CHECK(query_len >= 0 && seq_len >= query_len, "sequence {}: {} new of {} tokens", s,
                  query_len, seq_len);
    int64_t blocks_needed = (seq_len + cache.block_size() - 1) / cache.block_size();
    TESSERA_CHECK(blocks_needed <= meta.max_blocks_per_seq, "sequence {} needs {} blocks", s,
                  blocks_needed);
    for (int64_t b = 0; b < blocks_needed; ++b) {
      int32_t block = meta.block_tables[s * meta.max_blocks_per_seq + b];
      TESSERA_CHECK(block >= 0 && block < cache.num_blocks(), "sequence {} block {} is {}", s, b,
                    block);
    }
  }
}

void attention_cpu(const KernelArgs& args) {
  ForwardContext& context = current_forward_context();
  const AttentionMetadata& meta = *context.attention;
  int64_t layer = args.attributes.get_int("layer");
  TESSERA_CHECK(context.kv_caches && layer < static_cast<int64_t>(context.kv_caches->size()),
                "no KV cache for layer {}", layer);
  PagedKVCache& cache = (*context.kv_caches)[layer];
  AttentionShape shape{args.attributes.get_int("num_heads"),
                       args.attributes.get_int("num_kv_heads"),
                       args.attributes.get_int("head_size"),
                       cache.block_size(),
                       static_cast<float>(args.attributes.get_float("scale")),
                       args.attributes.get_int("sliding_window", 0),
                       static_cast<float>(args.attributes.get_float("logit_softcap", 0.0))};
  const Tensor &query = args.inputs[0], &key = args.inputs[1], &value = args.inputs[2];
  check_cache_dtype(cache, query.dtype(), layer);
  check_metadata(meta, cache, query.size(0));
  const bool float8 = cache.key.dtype() == DType::f8_e4m3;
  visit_dtype(query.dtype(), [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      if (float8) {
        write_kv<T, Float8E4M3>(key.data<T>(), value.data<T>(), cache, meta, shape);
        attend<T, Float8E4M3>(query.data<T>(), cache, meta, shape, args.outputs[0].data<T>());
      } else {
        write_kv<T, T>(key.data<T>(), value.data<T>(), cache, meta, shape);
        attend<T, T>(query.data<T>(), cache, meta, shape, args.outputs[0].data<T>());
      }
    }
  });
}

TESSERA_REGISTER_KERNEL("attention", DeviceType::cpu, attention_cpu);

}  // namespace
}  // namespace tessera
