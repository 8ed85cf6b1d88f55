// Attention lab: checks and times the GPU attention op (kernels/cuda/attention/attention.cu) at
// Llama-like shapes (32 q heads, 8 kv heads, head 128, bf16, paged cache of 16-token blocks):
//   1. measures the ceilings: device-to-device copy bandwidth (1 GiB, read + write) and a bf16
//      8192^3 GEMM through the matmul kernel (cuBLAS);
//   2. checks decode (split into partitions and not) and prefill against the float64 reference of
//      tests/support/reference.h, over the keys and values the op wrote to the cache; decode on
//      both of its kernels (tensor cores, kernels/cuda/attention/attention_decode_mma.cuh, and CUDA
//      cores, attention_decode.cuh, chosen with $TESSERA_DECODE_ATTENTION);
//   3. times decode on both kernels, for batches 1, 8, 32, 128 at contexts 1k and 4k, and at the
//      Llama-3.2-1B shape (head 64) at context 128: GB/s over the bytes it must move (K/V read
//      once per kv head, q read, out written) against the copy ceiling; a call's blocks are
//      scattered over a cache of at least 512 MiB, and consecutive calls use different blocks,
//      so the timing reads HBM, not L2;
//   4. times a decode step's rope and attention apart and as rotary_attention (one tensor-core
//      launch that rotates the query and the step's key itself) at the 1B shape, context 128;
//   5. times prefill (1 x 2048 and 8 x 512 new tokens, no cached prefix): TFLOP/s over the causal
//      FLOPs (4 * head_size * heads per visible (query, key) pair) against the GEMM ceiling.
// Checks and decode timings run with an FP8 (e4m3) cache too (engine.kv_cache_dtype fp8: codes
// with a key and a value scale; the reference reads what the codes stand for).
// Times are medians of event-timed samples after warm-up; a sample runs the op enough times back
// to back to span about a millisecond (bench/lab_harness.h, with the ceilings). Exits non-zero
// when a check fails.
//
//   attention_lab [--device cuda:N] [--quick] [--skip-timing]
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench/lab_harness.h"
#include "kernels/attention_metadata.h"
#include "runtime/attributes.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/float8.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor.h"
#include "support/reference.h"

namespace tessera::lab {
namespace {

constexpr int64_t kHeads = 32;
constexpr int64_t kKvHeads = 8;
constexpr int64_t kHeadSize = 128;
constexpr int64_t kBlockSize = 16;
constexpr DType kDType = DType::bf16;
// Timed decode calls cycle over copies of the batch on disjoint blocks of at least this much
// cache, several times the L2 of current GPUs.
constexpr double kColdCacheBytes = 512.0 * 1024 * 1024;
constexpr int kMaxInstances = 64;

struct Sequence {
  int64_t cached;      // tokens already in the cache
  int64_t new_tokens;  // tokens this step
};

struct Shape4 {
  int64_t heads = kHeads;
  int64_t kv_heads = kKvHeads;
  int64_t head_size = kHeadSize;
  DType dtype = kDType;
  bool float8_cache = false;  // an e4m3 cache with kFloat8Scales

  DType cache_dtype() const { return float8_cache ? DType::f8_e4m3 : dtype; }
};

// An FP8 cache's key and value scales: values in -1..1 become codes up to 16 and 8.
constexpr float kFloat8KeyScale = 1.0f / 16, kFloat8ValueScale = 1.0f / 8;

// What an FP8 cache tensor's codes stand for, times `scale` (the cache's values).
std::vector<double> float8_values(const Tensor& codes, float scale) {
  const Tensor host = codes.to(kCPU);
  const auto* bytes = static_cast<const uint8_t*>(host.data_ptr());
  std::vector<double> values(static_cast<size_t>(host.numel()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(Float8E4M3::to_float(bytes[i])) * scale;
  return values;
}

// An FP8 cache tensor of the codes of `values` / scale.
Tensor float8_cache(const Tensor& values, float scale, Device device) {
  const std::vector<float> floats = values.to_floats();
  Tensor host = Tensor::empty(values.sizes(), DType::f8_e4m3, kCPU);
  auto* bytes = static_cast<uint8_t*>(host.data_ptr());
  for (size_t i = 0; i < floats.size(); ++i) bytes[i] = Float8E4M3(floats[i] / scale).bits;
  return host.to(device);
}

// One attention call's inputs: a batch of sequences over a one-layer paged cache. `instances`
// holds metadata for copies of the batch on disjoint cache blocks.
struct Problem {
  Shape4 shape;
  std::vector<Sequence> sequences;
  std::vector<AttentionMetadata> instances;
  std::vector<PagedKVCache> caches;
  std::array<Tensor, 3> inputs;  // query [T, H*D], key and value [T, Hk*D]
  Tensor out;
  Attributes attributes;

  int64_t tokens() const { return inputs[0].size(0); }
};

class Lab {
 public:
  explicit Lab(const LabArgs& args)
      : device_(args.device), random_(args.device), timer_(args.device, args.samples()) {}

  Problem make_problem(const Shape4& shape, std::vector<Sequence> sequences, double cache_bytes) {
    Problem problem;
    problem.shape = shape;
    problem.sequences = std::move(sequences);
    int64_t blocks_per_instance = 0;
    int64_t tokens = 0;
    for (const Sequence& s : problem.sequences) {
      blocks_per_instance += (s.cached + s.new_tokens + kBlockSize - 1) / kBlockSize;
      tokens += s.new_tokens;
    }
    const double instance_bytes = static_cast<double>(blocks_per_instance * kBlockSize *
                                                      shape.kv_heads * shape.head_size * 2) *
                                  static_cast<double>(element_size(shape.cache_dtype()));
    const int instances =
        std::clamp(static_cast<int>(std::ceil(cache_bytes / instance_bytes)), 1, kMaxInstances);
    const int64_t num_blocks = blocks_per_instance * instances;
    std::vector<int32_t> physical(static_cast<size_t>(num_blocks));
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(),
                 random_.generator());  // scattered, as after many requests
    for (int instance = 0; instance < instances; ++instance) {
      problem.instances.push_back(
          metadata(problem.sequences, physical.data() + instance * blocks_per_instance));
    }
    const tessera::Shape cache_shape{num_blocks, kBlockSize, shape.kv_heads, shape.head_size};
    if (shape.float8_cache) {
      problem.caches.push_back(
          {float8_cache(random_.uniform(cache_shape, DType::f32), kFloat8KeyScale, device_),
           float8_cache(random_.uniform(cache_shape, DType::f32), kFloat8ValueScale, device_),
           kFloat8KeyScale, kFloat8ValueScale});
    } else {
      problem.caches.push_back(
          {random_.uniform(cache_shape, shape.dtype), random_.uniform(cache_shape, shape.dtype)});
    }
    problem.inputs = {random_.uniform({tokens, shape.heads * shape.head_size}, shape.dtype),
                      random_.uniform({tokens, shape.kv_heads * shape.head_size}, shape.dtype),
                      random_.uniform({tokens, shape.kv_heads * shape.head_size}, shape.dtype)};
    problem.out = Tensor::empty({tokens, shape.heads * shape.head_size}, shape.dtype, device_);
    problem.attributes = {{"layer", int64_t{0}},
                          {"num_heads", shape.heads},
                          {"num_kv_heads", shape.kv_heads},
                          {"head_size", shape.head_size},
                          {"scale", 1.0 / std::sqrt(static_cast<double>(shape.head_size))}};
    return problem;
  }

  void run(Problem& problem, size_t instance) {
    ForwardContextScope scope(ForwardContext{&problem.instances[instance], &problem.caches});
    run_kernel("attention", device_.type,
               KernelArgs{problem.inputs, problem.attributes, std::span(&problem.out, 1)});
  }

  double time_us(const std::function<void(int)>& launch) { return timer_.median_us(launch); }
  void measure_ceilings() {
    ceilings_ = tessera::lab::measure_ceilings(timer_, random_, /*with_gemm=*/true);
  }
  const Ceilings& ceilings() const { return ceilings_; }
  Device device() const { return device_; }
  DeviceBackend& gpu() { return backend(device_); }

 private:
  AttentionMetadata metadata(const std::vector<Sequence>& sequences, const int32_t* blocks) {
    AttentionMetadata meta;
    meta.num_seqs = static_cast<int64_t>(sequences.size());
    meta.query_start_loc.push_back(0);
    std::vector<std::vector<int32_t>> tables;
    for (const Sequence& s : sequences) {
      const int64_t total = s.cached + s.new_tokens;
      std::vector<int32_t> table(blocks, blocks + (total + kBlockSize - 1) / kBlockSize);
      blocks += table.size();
      for (int64_t p = s.cached; p < total; ++p) {
        meta.slot_mapping.push_back(
            static_cast<int32_t>(table[p / kBlockSize] * kBlockSize + p % kBlockSize));
      }
      meta.max_blocks_per_seq =
          std::max(meta.max_blocks_per_seq, static_cast<int64_t>(table.size()));
      meta.max_query_len = std::max(meta.max_query_len, s.new_tokens);
      meta.max_seq_len = std::max(meta.max_seq_len, total);
      meta.seq_lens.push_back(static_cast<int32_t>(total));
      meta.query_start_loc.push_back(meta.query_start_loc.back() +
                                     static_cast<int32_t>(s.new_tokens));
      tables.push_back(std::move(table));
    }
    meta.num_tokens = meta.query_start_loc.back();
    meta.block_tables.assign(static_cast<size_t>(meta.num_seqs * meta.max_blocks_per_seq), -1);
    for (size_t s = 0; s < tables.size(); ++s) {
      std::copy(tables[s].begin(), tables[s].end(),
                meta.block_tables.begin() + static_cast<int64_t>(s) * meta.max_blocks_per_seq);
    }
    upload_metadata(meta, device_);
    return meta;
  }

  Device device_;
  LabRandom random_;
  LabTimer timer_;
  Ceilings ceilings_;
};

// ---- The float64 check: runs instance 0 once and recomputes every output from the cache the op
// wrote (so the new K/V rows are checked too: the reference reads them at their slots).

struct CheckResult {
  double relative_rms = 0;  // ||got - want|| / ||want||
  bool passed = false;
};

CheckResult check(Lab& lab, Problem& problem) {
  lab.run(problem, 0);
  const AttentionMetadata& meta = problem.instances[0];
  const Shape4& shape = problem.shape;
  const std::vector<double> query = problem.inputs[0].to_doubles();
  const PagedKVCache& cache = problem.caches[0];
  const bool float8 = shape.float8_cache;
  const std::vector<double> keys =
      float8 ? float8_values(cache.key, cache.key_scale) : cache.key.to_doubles();
  const std::vector<double> values =
      float8 ? float8_values(cache.value, cache.value_scale) : cache.value.to_doubles();
  const std::vector<double> got = problem.out.to_doubles();
  // The step's keys as the cache must hold them (an FP8 cache: the codes of key / key_scale).
  const std::vector<double> new_keys =
      float8
          ? float8_values(float8_cache(problem.inputs[1], cache.key_scale, kCPU), cache.key_scale)
          : problem.inputs[1].to_doubles();
  const int64_t kv_row = shape.kv_heads * shape.head_size;
  const int64_t q_row = shape.heads * shape.head_size;
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape.head_size));
  double diff = 0;
  double norm = 0;
  bool cache_written = true;
  for (int64_t s = 0; s < meta.num_seqs; ++s) {
    const Sequence& sequence = problem.sequences[static_cast<size_t>(s)];
    const int32_t* table = meta.block_tables.data() + s * meta.max_blocks_per_seq;
    const int64_t length = sequence.cached + sequence.new_tokens;
    // The sequence's keys and values in position order, read from their slots.
    test::RefTensor sequence_keys{{length, kv_row}, {}}, sequence_values{{length, kv_row}, {}};
    for (int64_t position = 0; position < length; ++position) {
      const int64_t slot =
          static_cast<int64_t>(table[position / kBlockSize]) * kBlockSize + position % kBlockSize;
      sequence_keys.values.insert(sequence_keys.values.end(), keys.begin() + slot * kv_row,
                                  keys.begin() + (slot + 1) * kv_row);
      sequence_values.values.insert(sequence_values.values.end(), values.begin() + slot * kv_row,
                                    values.begin() + (slot + 1) * kv_row);
    }
    const int64_t first_token = meta.query_start_loc[s];
    for (int64_t i = 0; i < sequence.new_tokens; ++i)  // the step's keys went to their slots
      cache_written = cache_written &&
                      std::equal(new_keys.begin() + (first_token + i) * kv_row,
                                 new_keys.begin() + (first_token + i + 1) * kv_row,
                                 sequence_keys.values.begin() + (sequence.cached + i) * kv_row);
    const test::RefTensor sequence_query{
        {sequence.new_tokens, q_row},
        std::vector<double>(query.begin() + first_token * q_row,
                            query.begin() + (first_token + sequence.new_tokens) * q_row)};
    const test::RefTensor want = test::reference_causal_attention(
        sequence_query, sequence_keys, sequence_values, shape.heads, shape.kv_heads, scale);
    for (size_t e = 0; e < want.values.size(); ++e) {
      const double have = got[static_cast<size_t>(first_token * q_row) + e];
      diff += (have - want.values[e]) * (have - want.values[e]);
      norm += want.values[e] * want.values[e];
    }
  }
  CheckResult result;
  result.relative_rms = std::sqrt(diff / norm);
  result.passed =
      cache_written && result.relative_rms < relative_tolerance(shape.dtype);  // NaN fails
  return result;
}

// Runs `body` with decode on `kernel` ("auto": tensor cores where they fit; "cuda_cores"), then
// puts back the caller's $TESSERA_DECODE_ATTENTION.
template <typename Body>
auto with_decode_kernel(const char* kernel, Body&& body) {
  struct Restore {
    ~Restore() {
      if (had) {
        setenv("TESSERA_DECODE_ATTENTION", previous.c_str(), 1);
      } else {
        unsetenv("TESSERA_DECODE_ATTENTION");
      }
    }
    bool had = false;
    std::string previous;
  } restore;
  if (const char* value = std::getenv("TESSERA_DECODE_ATTENTION"); value != nullptr) {
    restore.had = true;
    restore.previous = value;
  }
  setenv("TESSERA_DECODE_ATTENTION", kernel, 1);
  return body();
}

bool run_checks(Lab& lab) {
  struct Named {
    const char* name;
    Shape4 shape;
    std::vector<Sequence> sequences;
  };
  std::vector<Sequence> many_decodes;
  for (int64_t i = 0; i < 80; ++i) many_decodes.push_back({(i * 53) % 200, 1});
  const std::vector<Named> checks = {
      {"decode, keys split into partitions", {}, {{1500, 1}, {700, 1}, {64, 1}}},
      {"decode, 80 sequences, no split", {}, many_decodes},
      {"prefill over cached prefixes", {}, {{300, 200}, {0, 130}, {40, 1}}},
      {"decode, f32", {kHeads, kKvHeads, kHeadSize, DType::f32}, {{900, 1}, {33, 1}}},
      {"decode, head 64 (1B shape), split", {kHeads, kKvHeads, 64, kDType}, {{127, 1}, {40, 1}}},
      {"decode, GQA 16:1, head 64, f16", {16, 1, 64, DType::f16}, {{300, 1}, {0, 1}}},
      {"prefill, head 64, f16", {16, 4, 64, DType::f16}, {{100, 90}, {0, 70}}},
      {"decode, FP8 cache, split",
       {kHeads, kKvHeads, kHeadSize, kDType, true},
       {{1500, 1}, {700, 1}, {64, 1}}},
      {"decode, FP8 cache, head 64, f16", {16, 4, 64, DType::f16, true}, {{300, 1}, {0, 1}}},
      {"prefill, FP8 cache",
       {kHeads, kKvHeads, kHeadSize, kDType, true},
       {{300, 200}, {0, 130}, {40, 1}}},
  };
  bool all_passed = true;
  fmt::print("float64 checks (relative RMS error; decode on tensor cores, then CUDA cores):\n");
  for (const Named& named : checks) {
    for (const char* kernel : {"auto", "cuda_cores"}) {
      const bool decode = std::all_of(named.sequences.begin(), named.sequences.end(),
                                      [](const Sequence& s) { return s.new_tokens == 1; });
      if (!decode && std::string_view(kernel) != "auto") continue;
      Problem problem = lab.make_problem(named.shape, named.sequences, 0);
      const CheckResult result = with_decode_kernel(kernel, [&] { return check(lab, problem); });
      fmt::print("  {:<40} {:<5} {:<11} {:.2e}  {}\n", named.name, dtype_name(named.shape.dtype),
                 decode ? kernel : "", result.relative_rms, result.passed ? "ok" : "FAIL");
      all_passed = all_passed && result.passed;
    }
  }
  fmt::print("\n");
  return all_passed;
}

// Times decode over `contexts`. `graph_max_seq_len` > 0 launches it as a decode graph captured
// for that many keys does (the launch's max_seq_len, which sets the partitions), whatever the
// context.
void time_decode(Lab& lab, const Shape4& shape, std::initializer_list<int64_t> contexts,
                 int64_t graph_max_seq_len = 0) {
  fmt::print(
      "decode: {} q heads, {} kv heads, head {}, {}, {} cache, block {}{}; tensor cores (the "
      "default) and CUDA cores\n",
      shape.heads, shape.kv_heads, shape.head_size, dtype_name(shape.dtype),
      dtype_name(shape.cache_dtype()), kBlockSize,
      graph_max_seq_len > 0
          ? fmt::format(", launched as a graph captured for {} keys", graph_max_seq_len)
          : "");
  fmt::print("{:>6} {:>8} {:>10} {:>9} {:>8} {:>10} {:>9} {:>8}\n", "batch", "context", "tensor us",
             "GB/s", "copy%", "cuda us", "GB/s", "copy%");
  const double element = static_cast<double>(element_size(shape.dtype));
  const double cache_element = static_cast<double>(element_size(shape.cache_dtype()));
  for (int64_t context : contexts) {
    for (int64_t batch : {1, 8, 32, 128}) {
      Problem problem = lab.make_problem(
          shape, std::vector<Sequence>(static_cast<size_t>(batch), Sequence{context - 1, 1}),
          kColdCacheBytes);
      if (graph_max_seq_len > 0)
        for (AttentionMetadata& meta : problem.instances) meta.max_seq_len = graph_max_seq_len;
      // K and V read once per kv head, q read, out written.
      const double bytes =
          cache_element * 2.0 * batch * context * shape.kv_heads * shape.head_size +
          element * 2.0 * batch * shape.heads * shape.head_size;
      std::string line = fmt::format("{:>6} {:>8}", batch, context);
      for (const char* kernel : {"auto", "cuda_cores"}) {
        const double us = with_decode_kernel(kernel, [&] {
          return lab.time_us([&](int call) {
            lab.run(problem, static_cast<size_t>(call) % problem.instances.size());
          });
        });
        const Achieved rates = achieved(lab.ceilings(), bytes, 0, us);
        line +=
            fmt::format(" {:>10.1f} {:>9.0f} {:>7.0f}%", us, rates.gb_per_s, rates.copy_percent);
      }
      fmt::print("{}\n", line);
      problem = Problem{};
      lab.gpu().allocator(lab.device().index).empty_cache();
    }
  }
  fmt::print("\n");
}

// Times a decode step's rope and attention at the Llama-3.2-1B shape as the compiled model runs
// them with the rotary-attention pass off (rotary_embedding's kernel, then attention over the
// rotated rows) and on (rotary_attention over the qkv rows: on tensor cores one launch that
// rotates the query and the step's key itself; compile/passes/rotary_attention.cpp).
void time_rotary_decode(Lab& lab, const Shape4& shape, int64_t context) {
  fmt::print("rope + decode: {} q heads, {} kv heads, head {}, {}, context {}\n", shape.heads,
             shape.kv_heads, shape.head_size, dtype_name(shape.dtype), context);
  fmt::print("{:>6} {:>16} {:>22} {:>8}\n", "batch", "apart us", "rotary_attention us", "saved");
  for (int64_t batch : {1, 8, 32, 128}) {
    Problem problem = lab.make_problem(
        shape, std::vector<Sequence>(static_cast<size_t>(batch), Sequence{context - 1, 1}),
        kColdCacheBytes);
    const int64_t width = (shape.heads + 2 * shape.kv_heads) * shape.head_size;
    LabRandom random(lab.device());
    const Tensor qkv = random.uniform({batch, width}, shape.dtype);
    const Tensor positions = Tensor::from_ints(std::vector<int64_t>(batch, context - 1), {batch},
                                               DType::i32, lab.device());
    const Tensor cos_sin = random.uniform({context, shape.head_size}, DType::f32);
    std::array<Tensor, 4> outputs{
        problem.out, Tensor::empty(problem.inputs[0].sizes(), shape.dtype, lab.device()),
        Tensor::empty(problem.inputs[1].sizes(), shape.dtype, lab.device()),
        Tensor::empty(problem.inputs[2].sizes(), shape.dtype, lab.device())};
    const Attributes rope_attributes{{"head_size", shape.head_size}, {"is_neox", true}};
    Attributes fused_attributes = problem.attributes;
    fused_attributes.set("is_neox", true);
    const double apart = lab.time_us([&](int call) {
      const size_t instance = static_cast<size_t>(call) % problem.instances.size();
      ForwardContextScope scope(ForwardContext{&problem.instances[instance], &problem.caches});
      const Tensor rope_inputs[] = {positions, problem.inputs[0], problem.inputs[1], cos_sin};
      run_kernel("rotary_embedding", lab.device().type,
                 KernelArgs{rope_inputs, rope_attributes, std::span(outputs.data() + 1, 2)});
      const Tensor attention_inputs[] = {outputs[1], outputs[2], problem.inputs[2]};
      run_kernel("attention", lab.device().type,
                 KernelArgs{attention_inputs, problem.attributes, std::span(outputs.data(), 1)});
    });
    const double fused = lab.time_us([&](int call) {
      const size_t instance = static_cast<size_t>(call) % problem.instances.size();
      ForwardContextScope scope(ForwardContext{&problem.instances[instance], &problem.caches});
      const Tensor inputs[] = {positions, qkv, cos_sin};
      run_kernel("rotary_attention", lab.device().type,
                 KernelArgs{inputs, fused_attributes, outputs});
    });
    fmt::print("{:>6} {:>16.1f} {:>22.1f} {:>7.1f}%\n", batch, apart, fused,
               100.0 * (apart - fused) / apart);
    problem = Problem{};
    lab.gpu().allocator(lab.device().index).empty_cache();
  }
  fmt::print("\n");
}

void time_prefill(Lab& lab) {
  fmt::print("prefill: {} q heads, {} kv heads, head {}, {}, causal, no cached prefix\n", kHeads,
             kKvHeads, kHeadSize, dtype_name(kDType));
  fmt::print("{:>14} {:>10} {:>9} {:>8}\n", "sequences", "time us", "TFLOP/s", "gemm%");
  for (const auto& [count, length] : {std::pair<int64_t, int64_t>{1, 2048}, {8, 512}}) {
    Problem problem = lab.make_problem(
        {}, std::vector<Sequence>(static_cast<size_t>(count), Sequence{0, length}), 0);
    const double us = lab.time_us([&](int) { lab.run(problem, 0); });
    // Query i of a sequence sees i + 1 keys: 2 FLOPs per multiply-add, q.k and p.v.
    const double pairs = static_cast<double>(count) * length * (length + 1) / 2.0;
    const double flops = 4.0 * pairs * kHeads * kHeadSize;
    const Achieved rates = achieved(lab.ceilings(), 0, flops, us);
    fmt::print("{:>14} {:>10.1f} {:>9.1f} {:>7.1f}%\n", fmt::format("{} x {}", count, length), us,
               rates.tflops, rates.gemm_percent);
  }
  fmt::print("\n");
}

int run_lab(const LabArgs& args) {
  fmt::print("attention_lab on {} ({})\n", args.device.str(),
             backend(args.device).device_name(args.device.index));
  Lab lab(args);
  if (!args.skip_timing) lab.measure_ceilings();
  const bool passed = run_checks(lab);
  if (!args.skip_timing) {
    time_decode(lab, Shape4{}, {1024, 4096});
    time_decode(lab, Shape4{kHeads, kKvHeads, kHeadSize, kDType, true}, {1024, 4096});
    time_decode(lab, Shape4{kHeads, kKvHeads, 64, kDType}, {128, 2048});
    time_decode(lab, Shape4{kHeads, kKvHeads, 64, kDType, true}, {2048});
    // As `tessera serve` runs it: its decode graphs are captured for the model's length.
    time_decode(lab, Shape4{kHeads, kKvHeads, 64, kDType}, {128, 1024}, 131072);
    time_rotary_decode(lab, Shape4{kHeads, kKvHeads, 64, kDType}, 128);
    time_prefill(lab);
  }
  if (!passed) fmt::print("some checks FAILED\n");
  return passed ? 0 : 2;
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  return tessera::lab::lab_main("attention_lab",
                                "checks and times the GPU attention op (decode and prefill)", argc,
                                argv, tessera::lab::run_lab);
}
