// Attention lab: checks and times the GPU attention op (kernels/cuda/attention.cu) at Llama-like
// shapes (32 q heads, 8 kv heads, head 128, bf16, paged cache of 16-token blocks):
//   1. measures the ceilings: device-to-device copy bandwidth (1 GiB, read + write) and a bf16
//      8192^3 GEMM through the matmul kernel (cuBLAS);
//   2. checks decode (split into partitions and not) and prefill against a float64 reference
//      computed here from the cache the op wrote;
//   3. times decode for batches 1, 8, 32, 128 at contexts 1k and 4k: GB/s over the bytes it must
//      move (K/V read once per kv head, q read, out written) against the copy ceiling; a call's
//      blocks are scattered over a cache of at least 512 MiB, and consecutive calls use
//      different blocks, so the timing reads HBM, not L2;
//   4. times prefill (1 x 2048 and 8 x 512 new tokens, no cached prefix): TFLOP/s over the causal
//      FLOPs (4 * head_size * heads per visible (query, key) pair) against the GEMM ceiling.
// Times are medians of event-timed samples after warm-up; a sample runs the op enough times back
// to back to span about a millisecond. Exits non-zero when a check fails.
//
//   attention_lab [--quick]
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/attention_metadata.h"
#include "kernels/attributes.h"
#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/kernel_registry.h"
#include "kernels/logging.h"
#include "kernels/tensor.h"

namespace tessera::lab {
namespace {

constexpr double kGB = 1e9;
constexpr double kTera = 1e12;
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
};

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
  Lab(Device device, int samples)
      : device_(device), backend_(backend(device)), samples_(samples), rng_(20240611) {}

  // Uniform random values in [-1, 1) rounded through `dtype`; large tensors tile one random
  // block on the device, which is as good as fresh data for timing and far faster to make.
  Tensor random(const tessera::Shape& sizes, DType dtype) {
    const int64_t numel = shape_numel(sizes);
    constexpr int64_t kBlock = int64_t{1} << 22;
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> values(static_cast<size_t>(std::min(numel, kBlock)));
    for (float& value : values) value = uniform(rng_);
    if (numel <= kBlock) return Tensor::from_floats(values, sizes, dtype, device_);
    Tensor block = Tensor::from_floats(values, {kBlock}, dtype, device_);
    Tensor out = Tensor::empty(sizes, dtype, device_);
    const size_t element = element_size(dtype);
    for (int64_t begin = 0; begin < numel; begin += kBlock) {
      const int64_t count = std::min(kBlock, numel - begin);
      backend_.copy(static_cast<char*>(out.data_ptr()) + begin * element, device_, block.data_ptr(),
                    device_, static_cast<size_t>(count) * element);
    }
    return out;
  }

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
                                  static_cast<double>(element_size(shape.dtype));
    const int instances =
        std::clamp(static_cast<int>(std::ceil(cache_bytes / instance_bytes)), 1, kMaxInstances);
    const int64_t num_blocks = blocks_per_instance * instances;
    std::vector<int32_t> physical(static_cast<size_t>(num_blocks));
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), rng_);  // scattered, as after many requests
    for (int instance = 0; instance < instances; ++instance) {
      problem.instances.push_back(
          metadata(problem.sequences, physical.data() + instance * blocks_per_instance));
    }
    const tessera::Shape cache_shape{num_blocks, kBlockSize, shape.kv_heads, shape.head_size};
    problem.caches.push_back({random(cache_shape, shape.dtype), random(cache_shape, shape.dtype)});
    problem.inputs = {random({tokens, shape.heads * shape.head_size}, shape.dtype),
                      random({tokens, shape.kv_heads * shape.head_size}, shape.dtype),
                      random({tokens, shape.kv_heads * shape.head_size}, shape.dtype)};
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

  // Median microseconds per call of `launch(i)`, i counting calls.
  double time_us(const std::function<void(int)>& launch) {
    Stream& stream = backend_.current_stream(device_.index);
    int call = 0;
    for (int i = 0; i < 3; ++i) launch(call++);  // first-call costs: shared-memory opt-in, caches
    stream.synchronize();
    auto start = backend_.create_event(device_.index);
    auto end = backend_.create_event(device_.index);
    start->record(stream);
    launch(call++);
    end->record(stream);
    end->synchronize();
    const double single_ms = std::max<double>(start->elapsed_ms(*end), 1e-4);
    const int repeats = std::clamp(static_cast<int>(std::ceil(1.0 / single_ms)), 1, 1000);
    std::vector<double> samples;
    for (int sample = 0; sample < samples_; ++sample) {
      start->record(stream);
      for (int i = 0; i < repeats; ++i) launch(call++);
      end->record(stream);
      end->synchronize();
      samples.push_back(1000.0 * start->elapsed_ms(*end) / repeats);
    }
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    return samples[samples.size() / 2];
  }

  void measure_ceilings() {
    constexpr int64_t kCopyElements = int64_t{1} << 29;  // 1 GiB of bf16
    Tensor source = random({kCopyElements}, DType::bf16);
    Tensor destination = Tensor::empty({kCopyElements}, DType::bf16, device_);
    const double copy_us = time_us([&](int) {
      backend_.copy(destination.data_ptr(), device_, source.data_ptr(), device_, source.nbytes());
    });
    copy_gb_per_s_ = 2.0 * static_cast<double>(source.nbytes()) / (copy_us * 1e-6) / kGB;

    constexpr int64_t kSide = 8192;
    Tensor a = random({kSide, kSide}, DType::bf16);
    Tensor b = random({kSide, kSide}, DType::bf16);
    Tensor c = Tensor::empty({kSide, kSide}, DType::bf16, device_);
    const Tensor inputs[] = {a, b};
    const double gemm_us = time_us([&](int) {
      run_kernel("matmul", device_.type, KernelArgs{inputs, Attributes{}, std::span(&c, 1)});
    });
    gemm_tflops_ = 2.0 * kSide * kSide * kSide / (gemm_us * 1e-6) / kTera;
    fmt::print(
        "ceilings: device-to-device copy {:.0f} GB/s (1 GiB, read + write), bf16 GEMM "
        "{:.0f} TFLOP/s (8192^3, cuBLAS)\n\n",
        copy_gb_per_s_, gemm_tflops_);
    backend_.allocator(device_.index).empty_cache();
  }

  double copy_gb_per_s() const { return copy_gb_per_s_; }
  double gemm_tflops() const { return gemm_tflops_; }
  Device device() const { return device_; }
  DeviceBackend& gpu() { return backend_; }

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
    auto device_ints = [&](const std::vector<int32_t>& values) {
      std::vector<int64_t> wide(values.begin(), values.end());
      return Tensor::from_ints(wide, {static_cast<int64_t>(values.size())}, DType::i32, device_);
    };
    meta.device_query_start_loc = device_ints(meta.query_start_loc);
    meta.device_seq_lens = device_ints(meta.seq_lens);
    meta.device_block_tables = device_ints(meta.block_tables);
    meta.device_slot_mapping = device_ints(meta.slot_mapping);
    return meta;
  }

  Device device_;
  DeviceBackend& backend_;
  int samples_;
  std::mt19937_64 rng_;
  double copy_gb_per_s_ = 1;
  double gemm_tflops_ = 1;
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
  const std::vector<double> keys = problem.caches[0].key.to_doubles();
  const std::vector<double> values = problem.caches[0].value.to_doubles();
  const std::vector<double> got = problem.out.to_doubles();
  const std::vector<double> new_keys = problem.inputs[1].to_doubles();
  const int64_t kv_row = shape.kv_heads * shape.head_size;
  const int64_t q_row = shape.heads * shape.head_size;
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape.head_size));
  double diff = 0;
  double norm = 0;
  bool cache_written = true;
  for (int64_t s = 0; s < meta.num_seqs; ++s) {
    const Sequence& sequence = problem.sequences[static_cast<size_t>(s)];
    const int32_t* table = meta.block_tables.data() + s * meta.max_blocks_per_seq;
    auto slot = [&](int64_t position) {
      return static_cast<int64_t>(table[position / kBlockSize]) * kBlockSize +
             position % kBlockSize;
    };
    for (int64_t i = 0; i < sequence.new_tokens; ++i) {
      const int64_t token = meta.query_start_loc[s] + i;
      const int64_t position = sequence.cached + i;
      for (int64_t e = 0; e < kv_row; ++e)
        cache_written =
            cache_written && keys[slot(position) * kv_row + e] == new_keys[token * kv_row + e];
      for (int64_t h = 0; h < shape.heads; ++h) {
        const int64_t kv_head = h / (shape.heads / shape.kv_heads);
        std::vector<double> scores(static_cast<size_t>(position + 1));
        double top = -INFINITY;
        for (int64_t p = 0; p <= position; ++p) {
          double dot = 0;
          for (int64_t d = 0; d < shape.head_size; ++d) {
            dot += query[token * q_row + h * shape.head_size + d] *
                   keys[slot(p) * kv_row + kv_head * shape.head_size + d];
          }
          scores[p] = dot * scale;
          top = std::max(top, scores[p]);
        }
        double total = 0;
        for (double& score : scores) total += (score = std::exp(score - top));
        for (int64_t d = 0; d < shape.head_size; ++d) {
          double want = 0;
          for (int64_t p = 0; p <= position; ++p)
            want += scores[p] / total * values[slot(p) * kv_row + kv_head * shape.head_size + d];
          const double have = got[token * q_row + h * shape.head_size + d];
          diff += (have - want) * (have - want);
          norm += want * want;
        }
      }
    }
  }
  CheckResult result;
  result.relative_rms = std::sqrt(diff / norm);
  const double tolerance = shape.dtype == DType::f32   ? 1e-5
                           : shape.dtype == DType::f16 ? 2e-3
                                                       : 1.5e-2;
  result.passed = cache_written && result.relative_rms < tolerance;  // NaN fails
  return result;
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
      {"prefill, head 64, f16", {16, 4, 64, DType::f16}, {{100, 90}, {0, 70}}},
  };
  bool all_passed = true;
  fmt::print("float64 checks (relative RMS error):\n");
  for (const Named& named : checks) {
    Problem problem = lab.make_problem(named.shape, named.sequences, 0);
    const CheckResult result = check(lab, problem);
    fmt::print("  {:<40} {:<5} {:.2e}  {}\n", named.name, dtype_name(named.shape.dtype),
               result.relative_rms, result.passed ? "ok" : "FAIL");
    all_passed = all_passed && result.passed;
  }
  fmt::print("\n");
  return all_passed;
}

void time_decode(Lab& lab) {
  fmt::print("decode: {} q heads, {} kv heads, head {}, {}, block {}\n", kHeads, kKvHeads,
             kHeadSize, dtype_name(kDType), kBlockSize);
  fmt::print("{:>6} {:>8} {:>10} {:>9} {:>8}\n", "batch", "context", "time us", "GB/s", "copy%");
  const double element = static_cast<double>(element_size(kDType));
  for (int64_t context : {1024, 4096}) {
    for (int64_t batch : {1, 8, 32, 128}) {
      Problem problem = lab.make_problem(
          {}, std::vector<Sequence>(static_cast<size_t>(batch), Sequence{context - 1, 1}),
          kColdCacheBytes);
      const double us = lab.time_us([&](int call) {
        lab.run(problem, static_cast<size_t>(call) % problem.instances.size());
      });
      // K and V read once per kv head, q read, out written.
      const double bytes = element * (2.0 * batch * context * kKvHeads * kHeadSize +
                                      2.0 * batch * kHeads * kHeadSize);
      const double gb_per_s = bytes / (us * 1e-6) / kGB;
      fmt::print("{:>6} {:>8} {:>10.1f} {:>9.0f} {:>7.0f}%\n", batch, context, us, gb_per_s,
                 100.0 * gb_per_s / lab.copy_gb_per_s());
      problem = Problem{};
      lab.gpu().allocator(lab.device().index).empty_cache();
    }
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
    const double tflops = flops / (us * 1e-6) / kTera;
    fmt::print("{:>14} {:>10.1f} {:>9.1f} {:>7.1f}%\n", fmt::format("{} x {}", count, length), us,
               tflops, 100.0 * tflops / lab.gemm_tflops());
  }
  fmt::print("\n");
}

int run_lab(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  Device device;
  if (!first_gpu(&device)) {
    fmt::print(stderr, "attention_lab: no GPU device is available (this lab times GPU kernels)\n");
    return 1;
  }
  DeviceBackend& gpu = backend(device);
  fmt::print("attention_lab on {} ({})\n", device.str(), gpu.device_name(device.index));
  Lab lab(device, quick ? 5 : 21);
  lab.measure_ceilings();
  const bool passed = run_checks(lab);
  time_decode(lab);
  time_prefill(lab);
  if (!passed) fmt::print("some checks FAILED\n");
  return passed ? 0 : 2;
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  tessera::log_to_stderr();
  try {
    return tessera::lab::run_lab(argc, argv);
  } catch (const std::exception& error) {
    fmt::print(stderr, "attention_lab: {}\n", error.what());
    return 1;
  }
}
