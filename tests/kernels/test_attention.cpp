// The attention op against a float64 reference: several sequences with cached prefixes (prefill
// chunks) and single-token decodes in one batch, GQA, scattered blocks, f32/bf16/f16; sliding
// windows and tanh softcapping of the scores (Gemma); an FP8 cache (e4m3 codes with a key and a
// value scale), against the reference over the values its codes stand for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <tuple>

#include "compile/ops/ops.h"
#include "kernels/attention_metadata.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/float8.h"

using namespace tessera;

namespace {

struct Sequence {
  int64_t cached;      // tokens already in the cache
  int64_t new_tokens;  // tokens this step
};

struct AttentionCase {
  int64_t heads, kv_heads, head_size, block_size, num_blocks;
  std::vector<Sequence> sequences;
  int64_t sliding_window = 0;  // keys at positions > p - window; 0: all
  double logit_softcap = 0;    // scores -> tanh(scores / cap) * cap; 0: none
  // The longest sequence the launch is told of, as a decode graph captured for longer sequences
  // passes it (0: the longest here). Decode splits keys into partitions by it.
  int64_t launch_max_seq_len = 0;
  double query_scale = 1;  // multiplies the queries (in -1..1)
};

// An FP8 KV cache's scales (engine.kv_cache_dtype fp8).
struct Float8Cache {
  float key_scale = 1.0f;
  float value_scale = 1.0f;
};

// e4m3 codes of values * inverse, as the cache write computes them.
std::vector<uint8_t> float8_codes(const std::vector<float>& values, float inverse) {
  std::vector<uint8_t> codes(values.size());
  for (size_t i = 0; i < values.size(); ++i) codes[i] = Float8E4M3(values[i] * inverse).bits;
  return codes;
}

// What the codes of values * (1 / scale) stand for: the values an FP8 cache attends over.
std::vector<float> through_float8(const std::vector<float>& values, float scale) {
  std::vector<float> result;
  for (uint8_t code : float8_codes(values, 1.0f / scale))
    result.push_back(Float8E4M3::to_float(code) * scale);
  return result;
}

Tensor float8_tensor(const std::vector<uint8_t>& codes, const Shape& shape, Device device) {
  Tensor tensor = Tensor::empty(shape, DType::f8_e4m3, kCPU);
  std::memcpy(tensor.data_ptr(), codes.data(), codes.size());
  return tensor.to(device);
}

std::vector<uint8_t> float8_bytes(const Tensor& tensor) {
  const Tensor host = tensor.to(kCPU);
  const auto* bytes = static_cast<const uint8_t*>(host.data_ptr());
  return std::vector<uint8_t>(bytes, bytes + host.numel());
}

std::vector<float> random_values(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

// Runs the case on `device` and compares with a float64 reference; returns the relative error.
double run_case(const AttentionCase& c, DType dtype, Device device, uint32_t seed,
                std::optional<Float8Cache> float8 = std::nullopt) {
  std::mt19937 rng(seed);
  const int64_t kv_row = c.kv_heads * c.head_size, q_row = c.heads * c.head_size;
  // Full key/value history per sequence (cached part first), rounded through the dtype.
  auto rounded = [&](std::vector<float> values) {
    return Tensor::from_floats(values, {static_cast<int64_t>(values.size())}, dtype).to_floats();
  };
  AttentionMetadata meta;
  meta.num_seqs = static_cast<int64_t>(c.sequences.size());
  meta.query_start_loc.push_back(0);
  std::vector<int32_t> free_blocks(static_cast<size_t>(c.num_blocks));
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);  // scattered, out of order
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::vector<float>> keys, values;
  for (const Sequence& s : c.sequences) {
    int64_t total = s.cached + s.new_tokens;
    keys.push_back(rounded(random_values(static_cast<size_t>(total * kv_row), rng)));
    values.push_back(rounded(random_values(static_cast<size_t>(total * kv_row), rng)));
    std::vector<int32_t> table;
    for (int64_t b = 0; b < (total + c.block_size - 1) / c.block_size; ++b) {
      table.push_back(free_blocks.back());
      free_blocks.pop_back();
    }
    tables.push_back(table);
    meta.max_blocks_per_seq =
        std::max<int64_t>(meta.max_blocks_per_seq, static_cast<int64_t>(table.size()));
    meta.seq_lens.push_back(static_cast<int32_t>(total));
    meta.max_query_len = std::max(meta.max_query_len, s.new_tokens);
    meta.max_seq_len = std::max(meta.max_seq_len, total);
    meta.query_start_loc.push_back(meta.query_start_loc.back() +
                                   static_cast<int32_t>(s.new_tokens));
    for (int64_t p = s.cached; p < total; ++p)
      meta.slot_mapping.push_back(table[p / c.block_size] * c.block_size + p % c.block_size);
  }
  meta.max_seq_len = std::max(meta.max_seq_len, c.launch_max_seq_len);
  meta.num_tokens = meta.query_start_loc.back();
  meta.block_tables.assign(static_cast<size_t>(meta.num_seqs * meta.max_blocks_per_seq), -1);
  for (size_t s = 0; s < tables.size(); ++s)
    std::copy(tables[s].begin(), tables[s].end(),
              meta.block_tables.begin() + s * meta.max_blocks_per_seq);
  // The cache holds the cached prefixes; this step's tokens arrive as key/value inputs.
  Shape cache_shape{c.num_blocks, c.block_size, c.kv_heads, c.head_size};
  std::vector<float> key_cache = random_values(static_cast<size_t>(shape_numel(cache_shape)), rng);
  std::vector<float> value_cache = random_values(key_cache.size(), rng);
  std::vector<float> step_keys, step_values;
  for (size_t s = 0; s < c.sequences.size(); ++s) {
    for (int64_t p = 0; p < c.sequences[s].cached + c.sequences[s].new_tokens; ++p) {
      int64_t slot = tables[s][p / c.block_size] * c.block_size + p % c.block_size;
      const float* k = keys[s].data() + p * kv_row;
      const float* v = values[s].data() + p * kv_row;
      if (p < c.sequences[s].cached) {
        std::copy(k, k + kv_row, key_cache.begin() + slot * kv_row);
        std::copy(v, v + kv_row, value_cache.begin() + slot * kv_row);
      } else {
        step_keys.insert(step_keys.end(), k, k + kv_row);
        step_values.insert(step_values.end(), v, v + kv_row);
      }
    }
  }
  std::vector<float> queries = random_values(static_cast<size_t>(meta.num_tokens * q_row), rng);
  for (float& query : queries) query = static_cast<float>(query * c.query_scale);
  queries = rounded(queries);
  std::vector<PagedKVCache> caches;
  if (float8) {
    caches.push_back(
        {float8_tensor(float8_codes(key_cache, 1.0f / float8->key_scale), cache_shape, device),
         float8_tensor(float8_codes(value_cache, 1.0f / float8->value_scale), cache_shape, device),
         float8->key_scale, float8->value_scale});
    // The reference attends over what the codes stand for, the step's rows too.
    for (std::vector<float>& sequence_keys : keys)
      sequence_keys = through_float8(sequence_keys, float8->key_scale);
    for (std::vector<float>& sequence_values : values)
      sequence_values = through_float8(sequence_values, float8->value_scale);
  } else {
    caches.push_back({Tensor::from_floats(key_cache, cache_shape, dtype, device),
                      Tensor::from_floats(value_cache, cache_shape, dtype, device)});
  }
  if (!device.is_cpu()) upload_metadata(meta, device);
  double scale = 1.0 / std::sqrt(static_cast<double>(c.head_size));
  Tensor out;
  {
    ForwardContextScope scope(ForwardContext{&meta, &caches});
    out = ops::attention(Tensor::from_floats(queries, {meta.num_tokens, q_row}, dtype, device),
                         Tensor::from_floats(step_keys, {meta.num_tokens, kv_row}, dtype, device),
                         Tensor::from_floats(step_values, {meta.num_tokens, kv_row}, dtype, device),
                         0, c.heads, c.kv_heads, c.head_size, scale, c.sliding_window,
                         c.logit_softcap);
  }
  // The new keys and values must now be in the cache at their slots (a decode kernel writes them
  // itself, the other paths by a launch of their own).
  // (FP8: the codes, read back as the values they stand for.)
  auto cached_values = [&](const Tensor& cache, float scale) {
    if (!float8) return cache.to_floats();
    std::vector<float> result;
    for (uint8_t code : float8_bytes(cache)) result.push_back(Float8E4M3::to_float(code) * scale);
    return result;
  };
  std::vector<float> keys_after = cached_values(caches[0].key, float8 ? float8->key_scale : 1);
  std::vector<float> values_after =
      cached_values(caches[0].value, float8 ? float8->value_scale : 1);
  for (size_t s = 0, token = 0; s < c.sequences.size(); ++s)
    for (int64_t p = c.sequences[s].cached; p < c.sequences[s].cached + c.sequences[s].new_tokens;
         ++p, ++token)
      for (int64_t i = 0; i < kv_row; ++i) {
        EXPECT_EQ(keys_after[meta.slot_mapping[token] * kv_row + i], keys[s][p * kv_row + i]);
        EXPECT_EQ(values_after[meta.slot_mapping[token] * kv_row + i], values[s][p * kv_row + i]);
      }
  // float64 reference.
  std::vector<float> got = out.to_floats();
  double diff = 0, norm = 0;
  for (size_t s = 0; s < c.sequences.size(); ++s) {
    for (int64_t i = 0; i < c.sequences[s].new_tokens; ++i) {
      int64_t token = meta.query_start_loc[s] + i, position = c.sequences[s].cached + i;
      for (int64_t h = 0; h < c.heads; ++h) {
        int64_t kv_head = h / (c.heads / c.kv_heads);
        // Keys outside the window get no weight (transformers adds -inf to their scores).
        const int64_t first =
            c.sliding_window > 0 ? std::max<int64_t>(0, position - c.sliding_window + 1) : 0;
        std::vector<double> scores;
        double top = -INFINITY;
        for (int64_t p = first; p <= position; ++p) {
          double dot = 0;
          for (int64_t d = 0; d < c.head_size; ++d)
            dot += double(queries[token * q_row + h * c.head_size + d]) *
                   keys[s][p * kv_row + kv_head * c.head_size + d];
          double score = dot * scale;
          if (c.logit_softcap > 0) score = std::tanh(score / c.logit_softcap) * c.logit_softcap;
          scores.push_back(score);
          top = std::max(top, scores.back());
        }
        double total = 0;
        for (double& x : scores) total += (x = std::exp(x - top));
        for (int64_t d = 0; d < c.head_size; ++d) {
          double want = 0;
          for (int64_t p = first; p <= position; ++p)
            want += scores[p - first] / total * values[s][p * kv_row + kv_head * c.head_size + d];
          double have = got[token * q_row + h * c.head_size + d];
          if (!std::isfinite(have)) return INFINITY;
          diff += (have - want) * (have - want);
          norm += want * want;
        }
      }
    }
  }
  return std::sqrt(diff / norm);
}

const std::vector<AttentionCase>& cases() {
  static const std::vector<AttentionCase> all = {
      // prefill from empty, a chunk over a cached prefix, and decodes, in one batch; GQA 4:2
      {4, 2, 64, 16, 40, {{0, 37}, {50, 9}, {70, 1}, {1, 1}, {15, 1}}},
      // MHA, head 128, block 8, long decode over many blocks
      {2, 2, 128, 8, 70, {{300, 1}, {0, 3}, {7, 2}}},
      // GQA 8:1 (head 8 as stories260K), odd lengths
      {8, 1, 8, 4, 64, {{0, 13}, {5, 1}, {22, 7}}},
      // decode only (every sequence one new token): GQA 4:1 head 64, and head 8 GQA 8:1
      {4, 1, 64, 16, 40, {{100, 1}, {0, 1}, {250, 1}}},
      {8, 1, 8, 4, 64, {{30, 1}, {0, 1}, {77, 1}}},
      // head 64 prefill chunks over cached prefixes, 305 tokens in 3 sequences, GQA 4:1
      {8, 2, 64, 16, 80, {{100, 120}, {37, 90}, {500, 95}}},
  };
  return all;
}

// Cases too slow for the CPU kernel, or aimed at GPU kernel paths (decode split into partitions,
// decode on tensor cores for GQA groups up to 16 and on CUDA cores beyond, head chunks of large
// GQA groups, generic head sizes).
const std::vector<AttentionCase>& gpu_cases() {
  static const std::vector<AttentionCase> all = [] {
    std::vector<AttentionCase> list = {
        // long decodes, head 128, GQA 4:1: few blocks, so keys split into partitions (some
        // empty for the shorter sequences)
        {16, 4, 128, 16, 800, {{2047, 1}, {4999, 1}, {3100, 1}, {1999, 1}}},
        // MHA decode, head 128: threads share (head, column) pairs
        {4, 4, 128, 16, 50, {{600, 1}, {33, 1}}},
        // a decode step with a sequence that has no new token (its cache rows stay as they are)
        {4, 1, 64, 16, 40, {{100, 1}, {60, 0}, {250, 1}}},
        // head 128 prefill over a cached prefix, with a decode in the batch
        {8, 2, 128, 16, 60, {{0, 200}, {300, 70}, {5, 1}}},
        // generic head sizes: 256 (prefill and split decode), 32, and 6
        {4, 2, 256, 16, 30, {{0, 70}, {90, 3}}},
        {4, 1, 256, 16, 40, {{400, 1}}},
        {4, 4, 32, 8, 40, {{20, 40}, {0, 1}}},
        {2, 1, 6, 4, 20, {{10, 5}, {3, 1}}},
        // GQA groups larger than one block's heads: 16 heads of 256, 32 heads of 128 per kv head
        {16, 1, 256, 16, 20, {{50, 1}, {10, 1}}},
        {32, 1, 128, 16, 20, {{40, 1}}},
        // decode on tensor cores: a group of 16 (both halves of the fragment's rows), and a
        // group of 3 (rows past it are zeros) with partial 32-key tiles
        {16, 1, 64, 16, 60, {{100, 1}, {0, 1}, {700, 1}}},
        {3, 1, 128, 16, 40, {{129, 1}, {31, 1}}},
        // a group of 17: decode on CUDA cores for bf16 and f16 as well
        {17, 1, 64, 16, 20, {{90, 1}}},
        // groups of 12 and 10: some lanes have a second q row (rows 8 .. group - 1), some not
        {12, 1, 128, 16, 40, {{200, 1}, {5, 1}}},
        {20, 2, 64, 16, 40, {{150, 1}, {0, 1}, {333, 1}}},
        // decodes launched as by a graph captured for 8192 keys: as many partitions as the
        // longest needs, over sequences of 1 to 5001 keys (short ones leave partitions with one
        // tile or none); the 1B shape (32 q and 8 kv heads of 64) and head 128
        {32, 8, 64, 16, 420, {{127, 1}, {5000, 1}, {600, 1}, {0, 1}, {300, 1}}, 0, 0, 8192},
        {16, 4, 128, 16, 420, {{127, 1}, {5000, 1}, {200, 1}, {0, 1}, {300, 0}}, 0, 0, 8192},
        // GQA 8:1 over two kv heads of 64: an FP8 cache's warp takes both, 16 rows
        {16, 2, 64, 16, 200, {{400, 1}, {37, 1}, {1100, 1}}},
    };
    // 70 decodes of varied lengths, head 128, GQA 4:1: enough blocks that keys are not split
    AttentionCase many{16, 4, 128, 16, 800, {}};
    for (int64_t i = 0; i < 70; ++i) many.sequences.push_back({(i * 37) % 300, 1});
    list.push_back(many);
    return list;
  }();
  return all;
}

// Sliding windows (shorter and longer than the sequences, across block edges) and softcaps
// (small enough to bite: the scores here reach a few units), alone and together, in prefill
// chunks over cached prefixes and in decodes.
const std::vector<AttentionCase>& window_and_softcap_cases() {
  static const std::vector<AttentionCase> all = {
      {4, 2, 64, 16, 40, {{0, 37}, {50, 9}, {70, 1}, {1, 1}, {15, 1}}, 4, 0},
      {4, 2, 64, 16, 40, {{0, 37}, {50, 9}, {70, 1}, {1, 1}, {15, 1}}, 0, 0.5},
      {8, 1, 8, 4, 64, {{0, 13}, {5, 1}, {22, 7}}, 5, 0.3},
      {2, 2, 128, 8, 70, {{300, 1}, {0, 3}, {7, 2}}, 100, 1.0},
      {4, 1, 64, 16, 40, {{100, 1}, {0, 1}, {250, 1}}, 17, 0.2},
      {8, 2, 64, 16, 80, {{100, 120}, {37, 90}, {500, 95}}, 64, 0.5},
      {4, 4, 32, 8, 40, {{20, 40}, {0, 1}}, 1000, 0.4},  // a window longer than every sequence
      {4, 4, 32, 8, 40, {{20, 40}, {0, 1}}, 1, 0},       // a window of one key: itself
  };
  return all;
}

double tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-5 : dtype == DType::f16 ? 2e-3 : 1.5e-2;
}

void check_device(Device device, const std::vector<AttentionCase>& case_list = cases(),
                  std::optional<Float8Cache> float8 = std::nullopt) {
  int index = 0;
  for (const AttentionCase& c : case_list) {
    for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      double error = run_case(c, dtype, device, 100 + index++, float8);
      EXPECT_LT(error, tolerance(dtype))
          << "case " << index << " (heads " << c.heads << ", kv heads " << c.kv_heads
          << ", head size " << c.head_size << ", " << c.sequences.size() << " sequences) "
          << dtype_name(dtype) << " on " << device.str()
          << (float8 ? fmt::format(", FP8 cache with scales {} and {}", float8->key_scale,
                                   float8->value_scale)
                     : "");
    }
  }
}

// Scales that put the values (in -1..1) on codes up to 20 and 448: the values saturate at 448 *
// 0.002 (codes and reference alike), and unit scales.
const Float8Cache kFloat8Scales[] = {{0.05f, 0.002f}, {1.0f, 1.0f}};

}  // namespace

TEST(Attention, CpuMatchesFloat64Reference) {
  check_device(kCPU);
}

TEST(Attention, CpuSlidingWindowAndSoftcapMatchFloat64Reference) {
  check_device(kCPU, window_and_softcap_cases());
}

TEST(Attention, CpuFloat8CacheMatchesFloat64Reference) {
  for (const Float8Cache& scales : kFloat8Scales) {
    check_device(kCPU, cases(), scales);
    check_device(kCPU, window_and_softcap_cases(), scales);
  }
}

TEST(Attention, ACacheOfAnotherDtypeOrABadScaleIsAClearError) {
  AttentionMetadata meta;
  meta.query_start_loc = {0};
  Tensor q = Tensor::from_floats(std::vector<float>(8, 0.5f), {1, 8});
  const Shape shape{1, 16, 1, 8};
  for (const auto& [cache, expected] : std::vector<std::pair<PagedKVCache, std::string>>{
           {{Tensor::empty(shape, DType::bf16), Tensor::empty(shape, DType::bf16)},
            "must hold the query's f32 or f8_e4m3"},
           {{Tensor::empty(shape, DType::f8_e4m3), Tensor::empty(shape, DType::f8_e4m3), 0.0f},
            "must be positive and finite"}}) {
    std::vector<PagedKVCache> caches{cache};
    ForwardContextScope scope(ForwardContext{&meta, &caches});
    try {
      ops::attention(q, q, q, 0, 1, 1, 8, 1.0);
      FAIL() << "expected an error: " << expected;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr(expected));
      EXPECT_THAT(error.what(), ::testing::HasSubstr("layer 0"));
    }
  }
}

TEST(Attention, NegativeWindowOrSoftcapIsAClearError) {
  Tensor q = Tensor::from_floats(std::vector<float>(8, 0.5f), {1, 8});
  for (auto [window, cap, field] :
       {std::tuple<int64_t, double, const char*>{-1, 0, "sliding_window"},
        {0, -2.0, "logit_softcap"}}) {
    try {
      ops::attention(q, q, q, 0, 1, 1, 8, 1.0, window, cap);
      FAIL() << "expected an error for " << field;
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr(field));
    }
  }
}

// The CUDA kernels (prefill on tensor cores, prefill, split-KV decode) with windows and softcaps.
TEST(GpuAttention, SlidingWindowAndSoftcapMatchFloat64Reference) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  check_device(gpu, window_and_softcap_cases());
  std::vector<AttentionCase> long_cases = {
      // split-KV decode: the window starts inside a partition, or before every partition
      {16, 4, 128, 16, 800, {{2047, 1}, {4999, 1}, {3100, 1}, {1999, 1}}, 700, 0.5},
      {16, 4, 128, 16, 800, {{2047, 1}, {4999, 1}, {3100, 1}, {1999, 1}}, 4096, 0},
      {8, 2, 128, 16, 60, {{0, 200}, {300, 70}, {5, 1}}, 33, 0.5},
      {4, 2, 256, 16, 30, {{0, 70}, {90, 3}}, 9, 0.5},
      // decode on tensor cores with a full group of 16, head 128, two kv heads, window and cap
      {32, 2, 128, 16, 100, {{700, 1}, {90, 1}, {1, 1}}, 37, 0.5},
      // partitions for a graph's 8192 keys; windows that span one partition or several
      {32, 8, 64, 16, 420, {{127, 1}, {5000, 1}, {600, 1}, {0, 1}}, 700, 0.5, 8192},
      {32, 8, 64, 16, 420, {{127, 1}, {5000, 1}, {600, 1}, {0, 1}}, 100, 0, 8192},
  };
  check_device(gpu, long_cases);
}

// Sets an environment variable for a scope, then puts back what was there.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* previous = std::getenv(name)) previous_ = previous;
    setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    if (previous_) {
      setenv(name_, previous_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

// bf16 and f16 decode takes tensor cores by default; the CUDA-core kernel, which they take beyond
// groups of 16, is forced here over the decode cases that split keys, skip a sequence, and use
// windows and softcaps.
TEST(GpuAttention, CudaCoreDecodeMatchesFloat64Reference) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  ScopedEnvironment cuda_cores("TESSERA_DECODE_ATTENTION", "cuda_cores");
  check_device(gpu,
               {
                   {16, 4, 128, 16, 800, {{2047, 1}, {4999, 1}, {3100, 1}, {1999, 1}}},
                   {16, 4, 128, 16, 800, {{2047, 1}, {4999, 1}, {3100, 1}, {1999, 1}}, 700, 0.5},
                   {4, 1, 64, 16, 40, {{100, 1}, {60, 0}, {250, 1}}, 17, 0.2},
                   {32, 8, 64, 16, 420, {{127, 1}, {5000, 1}, {600, 1}, {0, 1}}, 0, 0, 8192},
               });
}

// A decode kernel setting that is not a choice is an error naming it, on every decode path (f32
// takes the CUDA-core kernel whatever the setting).
TEST(GpuAttention, ABadDecodeKernelSettingIsAnErrorNamingIt) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  ScopedEnvironment typo("TESSERA_DECODE_ATTENTION", "cuda_core");
  for (DType dtype : {DType::f32, DType::bf16}) {
    try {
      run_case({4, 1, 64, 16, 40, {{100, 1}}}, dtype, gpu, 7);
      FAIL() << "expected an error for TESSERA_DECODE_ATTENTION=cuda_core in " << dtype_name(dtype);
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr("TESSERA_DECODE_ATTENTION='cuda_core'"));
      EXPECT_THAT(error.what(), ::testing::HasSubstr("cuda_cores"));
    }
  }
}

TEST(GpuAttention, MatchesFloat64Reference) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  check_device(gpu);
  check_device(gpu, gpu_cases());
}

// Every kernel over an FP8 cache: prefill and decode, on tensor cores and CUDA cores, split keys.
TEST(GpuAttention, Float8CacheMatchesFloat64Reference) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  for (const Float8Cache& scales : kFloat8Scales) {
    check_device(gpu, cases(), scales);
    check_device(gpu, gpu_cases(), scales);
    check_device(gpu, window_and_softcap_cases(), scales);
    ScopedEnvironment cuda_cores("TESSERA_DECODE_ATTENTION", "cuda_cores");
    check_device(gpu, {{16, 4, 128, 16, 800, {{2047, 1}, {4999, 1}, {3100, 1}, {1999, 1}}}},
                 scales);
  }
}

// The tensor-core decode over an FP8 cache multiplies in f16: a bf16 query past f16's range
// (65504) must be scaled into it, not turn into infinities.
TEST(GpuAttention, Float8CacheDecodeTakesBf16QueriesPastTheRangeOfF16) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  const std::vector<AttentionCase> large_queries = {
      {32, 8, 64, 16, 420, {{127, 1}, {900, 1}, {0, 1}}, 0, 0, 0, 3e5},
      {16, 4, 128, 16, 420, {{300, 1}, {2500, 1}}, 0, 0, 0, 1e6},
  };
  int seed = 900;
  for (const Float8Cache& scales : kFloat8Scales)
    for (const AttentionCase& c : large_queries)
      EXPECT_LT(run_case(c, DType::bf16, gpu, seed++, scales), tolerance(DType::bf16))
          << "heads " << c.heads << ", head size " << c.head_size << ", queries times "
          << c.query_scale << ", FP8 scales " << scales.key_scale << " and " << scales.value_scale;
}

TEST(Attention, WithoutAForwardContextIsAClearError) {
  Tensor q = Tensor::from_floats(std::vector<float>(8, 0.5f), {1, 8});
  try {
    ops::attention(q, q, q, 0, 1, 1, 8, 1.0);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("forward context"));
  }
}
