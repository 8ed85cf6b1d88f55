// Kernel lab (the llm.c dev/cuda habit): measures the GPU's ceilings (device-to-device copy
// bandwidth, large bf16 GEMM throughput through cuBLAS), then times every GPU kernel family at LLM
// sizes and prints a table: kernel, shape, dtype, time, GB/s, TFLOP/s and percent of the roofline
// (the time the ceilings allow for the kernel's bytes and FLOPs, over the measured time). Before
// timing, each kernel is checked against the float64 reference of tests/support/reference.h on a
// small problem with the same row length, so a fast wrong kernel shows up as FAIL in the same
// table. Timing, ceilings and checks are bench/lab_harness.h's.
//
//   kernel_lab [--device cuda:N] [--quick] [--skip-timing]
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/lab_harness.h"
#include "kernels/sampling.h"
#include "runtime/attributes.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor.h"

namespace tessera::lab {
namespace {

// Results within this much of zero are judged against rtol * 1e-3 (inputs are of order 1).
constexpr double kNearZero = 1e-3;

struct Row {
  std::string kernel;
  std::string shape;
  std::string dtype;
  double us = 0;
  double bytes = 0;
  double flops = 0;
  Check check;
};

// A lab run: the device, its random data, timer and ceilings, and the rows of the table.
class Lab {
 public:
  explicit Lab(const LabArgs& args)
      : device_(args.device), random_(args.device), timer_(args.device, args.samples()) {}

  Device device() const { return device_; }
  LabRandom& random() { return random_; }
  LabTimer& timer() { return timer_; }
  void measure_ceilings() { ceilings_ = tessera::lab::measure_ceilings(timer_, random_, true); }

  // i32 with about half the values nonzero.
  Tensor random_condition(const Shape& sizes) { return random_.integers(sizes, DType::i32, 2); }

  void run(const std::string& op, std::span<const Tensor> inputs, const Attributes& attributes,
           std::span<Tensor> outputs) {
    run_kernel(op, device_.type, KernelArgs{inputs, attributes, outputs});
  }

  void add(Row row) { rows_.push_back(std::move(row)); }

  bool print_table() const {
    fmt::print("{:<22} {:<32} {:<9} {:>10} {:>9} {:>9} {:>9}  {}\n", "kernel", "shape", "dtype",
               "time us", "GB/s", "TFLOP/s", "roofline", "check (worst error / allowed)");
    bool all_passed = true;
    for (const Row& row : rows_) {
      all_passed = all_passed && row.check.passed;
      if (row.us == 0) {  // --skip-timing
        fmt::print("{:<22} {:<32} {:<9} {:>51} {} ({:.2f})\n", row.kernel, row.shape, row.dtype, "",
                   row.check.passed ? "ok" : "FAIL", row.check.worst);
        continue;
      }
      const Achieved rates = achieved(ceilings_, row.bytes, row.flops, row.us);
      fmt::print("{:<22} {:<32} {:<9} {:>10.1f} {:>9.0f} {:>9.1f} {:>5.0f}% {:<4} {} ({:.2f})\n",
                 row.kernel, row.shape, row.dtype, row.us, rates.gb_per_s, rates.tflops,
                 rates.roofline_percent, rates.bound, row.check.passed ? "ok" : "FAIL",
                 row.check.worst);
    }
    return all_passed;
  }

 private:
  Device device_;
  LabRandom random_;
  LabTimer timer_;
  Ceilings ceilings_;
  std::vector<Row> rows_;
};

// ---- Cases: one problem maker, small for the check and large for timing.

struct Problem {
  std::vector<Tensor> inputs;  // as the kernel gets them (broadcast inputs expanded)
  Shape out_sizes;
  DType out_dtype = DType::f32;
  std::string shape;  // for the table
  double bytes = 0;   // bytes a perfect kernel moves
  double flops = 0;
};

struct Case {
  std::string name;  // table label
  std::string op;
  Attributes attributes;
  std::function<Problem(Lab&, bool small)> make;
  // Timed as replays of a device graph of calls, as a decode graph runs the kernel (some kernels
  // launch differently inside a capture: reduce.cu's argmax does not split its rows there).
  bool in_graph = false;
  std::string reference_op;             // the op whose reference checks it; empty: `op`
  int64_t workspace_words_per_row = 0;  // > 0: a second output, i64 scratch of this many per row
};

// The case's outputs for `problem`: its result, then its scratch when it takes one.
std::vector<Tensor> case_outputs(Lab& lab, const Case& test_case, const Problem& problem) {
  std::vector<Tensor> outputs{Tensor::empty(problem.out_sizes, problem.out_dtype, lab.device())};
  if (test_case.workspace_words_per_row > 0)
    outputs.push_back(Tensor::empty({test_case.workspace_words_per_row * problem.out_sizes[0]},
                                    DType::i64, lab.device()));
  return outputs;
}

double bytes_of(const Tensor& tensor) {
  return static_cast<double>(tensor.nbytes());
}

void run_case(Lab& lab, const Case& test_case, bool timing) {
  Row row;
  row.kernel = test_case.name;
  {
    Problem small = test_case.make(lab, true);
    std::vector<Tensor> outputs = case_outputs(lab, test_case, small);
    const auto launch = [&](int) {
      lab.run(test_case.op, small.inputs, test_case.attributes, outputs);
    };
    // Checked as it is timed: a case timed in a graph runs its check from one too.
    if (test_case.in_graph)
      (void)lab.timer().median_graph_us(launch, 1);
    else
      launch(0);
    const std::string& reference =
        test_case.reference_op.empty() ? test_case.op : test_case.reference_op;
    row.check = compare(
        outputs[0], reference_outputs(reference, small.inputs, test_case.attributes)[0], kNearZero);
    row.shape = small.shape;
    row.dtype = dtype_name(small.out_dtype);
  }
  if (timing) {
    Problem large = test_case.make(lab, false);
    std::vector<Tensor> outputs = case_outputs(lab, test_case, large);
    const auto launch = [&](int) {
      lab.run(test_case.op, large.inputs, test_case.attributes, outputs);
    };
    constexpr int kGraphCalls = 20;
    row.us = test_case.in_graph ? lab.timer().median_graph_us(launch, kGraphCalls)
                                : lab.timer().median_us(launch);
    row.shape = large.shape;
    row.dtype = dtype_name(large.out_dtype);
    row.bytes = large.bytes;
    row.flops = large.flops;
  }
  lab.add(std::move(row));
}

constexpr int64_t kRows = 4096;
constexpr int64_t kHidden = 4096;
constexpr int64_t kVocab = 128256;

// A pointwise case over [rows, hidden]: `inputs` random tensors in [low, high), plus optional
// broadcast of the second input along rows.
Case pointwise_case(std::string name, std::string op, Attributes attributes, int inputs, double low,
                    double high, bool broadcast_second = false) {
  Case test_case;
  test_case.name = std::move(name);
  test_case.op = std::move(op);
  test_case.attributes = std::move(attributes);
  test_case.make = [=](Lab& lab, bool small) {
    const Shape sizes{small ? 16 : kRows, kHidden};
    Problem problem;
    for (int i = 0; i < inputs; ++i) {
      if (i == 1 && broadcast_second) {
        Tensor row = lab.random().uniform({kHidden}, DType::bf16, low, high);
        problem.bytes += bytes_of(row);
        problem.inputs.push_back(row.expand(sizes));
      } else {
        problem.inputs.push_back(lab.random().uniform(sizes, DType::bf16, low, high));
        problem.bytes += bytes_of(problem.inputs.back());
      }
    }
    problem.out_sizes = sizes;
    problem.out_dtype = DType::bf16;
    problem.bytes += static_cast<double>(shape_numel(sizes)) * 2;
    problem.shape =
        broadcast_second ? fmt::format("{} * [{}]", shape_str(sizes), kHidden) : shape_str(sizes);
    return problem;
  };
  return test_case;
}

std::vector<Case> pointwise_cases() {
  std::vector<Case> cases;
  cases.push_back(pointwise_case("silu", "silu", {}, 1, -6, 6));
  cases.push_back(
      pointwise_case("gelu(none)", "gelu", {{"approximate", std::string("none")}}, 1, -4, 4));
  cases.push_back(
      pointwise_case("gelu(tanh)", "gelu", {{"approximate", std::string("tanh")}}, 1, -4, 4));
  cases.push_back(pointwise_case("exp", "exp", {}, 1, -4, 4));
  cases.push_back(pointwise_case("rsqrt", "rsqrt", {}, 1, 0.1, 4));
  cases.push_back(pointwise_case("pow_scalar(2)", "pow_scalar", {{"exponent", 2.0}}, 1, -2, 2));
  cases.push_back(pointwise_case("mul_scalar", "mul_scalar", {{"scalar", 0.125}}, 1, -2, 2));
  cases.push_back(pointwise_case("add", "add", {}, 2, -2, 2));
  cases.push_back(pointwise_case("mul (row broadcast)", "mul", {}, 2, -2, 2,
                                 /*broadcast_second=*/true));
  cases.push_back(pointwise_case("div", "div", {}, 2, 0.5, 2));
  cases.push_back(pointwise_case("maximum", "maximum", {}, 2, -2, 2));

  Case where;
  where.name = "where";
  where.op = "where";
  where.make = [](Lab& lab, bool small) {
    const Shape sizes{small ? 16 : kRows, kHidden};
    Problem problem;
    problem.inputs = {lab.random_condition(sizes), lab.random().uniform(sizes, DType::bf16),
                      lab.random().uniform(sizes, DType::bf16)};
    for (const Tensor& input : problem.inputs) problem.bytes += bytes_of(input);
    problem.out_sizes = sizes;
    problem.out_dtype = DType::bf16;
    problem.bytes += static_cast<double>(shape_numel(sizes)) * 2;
    problem.shape = shape_str(sizes) + " i32 cond";
    return problem;
  };
  cases.push_back(where);

  for (const auto& [from_dtype, to_dtype] :
       {std::pair{DType::bf16, DType::f32}, std::pair{DType::f32, DType::bf16},
        std::pair{DType::f32, DType::i32}}) {
    const DType from = from_dtype;  // plain copies for the lambdas below
    const DType to = to_dtype;
    Case cast;
    cast.name = fmt::format("cast {}->{}", dtype_name(from), dtype_name(to));
    cast.op = "cast";
    cast.attributes = {{"dtype", to}};
    cast.make = [from, to](Lab& lab, bool small) {
      const Shape sizes{small ? 16 : kRows, kHidden};
      Problem problem;
      problem.inputs = {lab.random().uniform(sizes, from, -100, 100)};
      problem.out_sizes = sizes;
      problem.out_dtype = to;
      problem.bytes =
          bytes_of(problem.inputs[0]) + static_cast<double>(shape_numel(sizes) * element_size(to));
      problem.shape = shape_str(sizes);
      return problem;
    };
    cases.push_back(cast);
  }
  return cases;
}

// A last-dim reduction or softmax over [rows, cols]; the check uses a few rows of the same
// length, so it runs the same kernel variant as the timed problem.
Case row_case(std::string name, std::string op, int64_t rows, int64_t cols, DType dtype,
              DType out_dtype, bool reduces) {
  Case test_case;
  test_case.name = std::move(name);
  test_case.op = std::move(op);
  test_case.make = [=](Lab& lab, bool small) {
    const int64_t row_count = small ? 4 : rows;
    Problem problem;
    problem.inputs = {lab.random().uniform({row_count, cols}, dtype, -3, 3)};
    problem.out_sizes = reduces ? Shape{row_count} : Shape{row_count, cols};
    problem.out_dtype = out_dtype;
    problem.bytes = bytes_of(problem.inputs[0]) +
                    static_cast<double>(shape_numel(problem.out_sizes) * element_size(out_dtype));
    problem.shape = shape_str(Shape{row_count, cols});
    return problem;
  };
  return test_case;
}

std::vector<Case> reduce_cases() {
  const DType bf16 = DType::bf16;
  std::vector<Case> cases;
  cases.push_back(row_case("sum", "sum", kRows, kHidden, bf16, bf16, true));
  cases.push_back(row_case("mean", "mean", kRows, kHidden, bf16, bf16, true));
  cases.push_back(row_case("max", "max", kRows, kHidden, bf16, bf16, true));
  cases.push_back(row_case("argmax", "argmax", kRows, kHidden, bf16, DType::i64, true));
  cases.push_back(row_case("argmax (vocab)", "argmax", 32, kVocab, bf16, DType::i64, true));
  // The greedy pick of a decode step: f32 logits of 1, 8 and 128 sequences (few rows are split
  // into chunks over the SMs, reduce.cu).
  for (int64_t rows : {1, 8, 128})
    cases.push_back(row_case(fmt::format("argmax (f32 logits, {} rows)", rows), "argmax", rows,
                             kVocab, DType::f32, DType::i64, true));
  // The greedy pick inside a decode graph (compilation.fuse_greedy_sampling) over bf16 logits:
  // the argmax op there runs a block per row (no scratch for a split in a capture); greedy_pick
  // splits few rows with the caller's scratch, as the op does outside a graph.
  for (const char* op : {"argmax", "greedy_pick"}) {
    for (int64_t rows : {1, 8, 32, 128}) {
      cases.push_back(row_case(fmt::format("{} (bf16 logits, {} rows, in a graph)", op, rows), op,
                               rows, kVocab, DType::bf16, DType::i64, true));
      cases.back().in_graph = true;
      cases.back().reference_op = "argmax";
      if (std::string(op) == "greedy_pick")
        cases.back().workspace_words_per_row = kGreedyPickWorkspaceWords;
    }
  }
  cases.push_back(row_case("softmax", "softmax", kRows, kHidden, bf16, bf16, false));
  cases.push_back(row_case("softmax (short rows)", "softmax", kRows * 8, 512, bf16, bf16, false));
  cases.push_back(
      row_case("softmax (vocab)", "softmax", 32, kVocab, DType::f32, DType::f32, false));
  return cases;
}

std::vector<Case> gather_cases() {
  std::vector<Case> cases;

  Case embedding;
  embedding.name = "embedding";
  embedding.op = "embedding";
  embedding.attributes = {{"vocab_start", int64_t{-1}}};  // the whole table (the op's default)
  embedding.make = [](Lab& lab, bool small) {
    const int64_t vocab = small ? 1000 : kVocab;
    const int64_t count = small ? 16 : 4096;
    Problem problem;
    problem.inputs = {lab.random().uniform({vocab, kHidden}, DType::bf16),
                      lab.random().integers({count}, DType::i32, vocab)};
    problem.out_sizes = {count, kHidden};
    problem.out_dtype = DType::bf16;
    problem.bytes = 2.0 * static_cast<double>(count * kHidden) * 2 + bytes_of(problem.inputs[1]);
    problem.shape = fmt::format("[{}, {}] by {} i32 ids", vocab, kHidden, count);
    return problem;
  };
  cases.push_back(embedding);

  Case cat;
  cat.name = "cat (last dim)";
  cat.op = "cat";
  cat.attributes = {{"dim", int64_t{-1}}};
  cat.make = [](Lab& lab, bool small) {
    const int64_t rows = small ? 16 : kRows;
    Problem problem;
    problem.inputs = {lab.random().uniform({rows, kHidden / 2}, DType::bf16),
                      lab.random().uniform({rows, kHidden / 2}, DType::bf16)};
    problem.out_sizes = {rows, kHidden};
    problem.out_dtype = DType::bf16;
    problem.bytes = 2.0 * static_cast<double>(rows * kHidden) * 2;
    problem.shape = fmt::format("2 x [{}, {}]", rows, kHidden / 2);
    return problem;
  };
  cases.push_back(cat);

  Case transpose;
  transpose.name = "copy (transpose)";
  transpose.op = "copy";
  transpose.make = [](Lab& lab, bool small) {
    const int64_t rows = small ? 16 : kRows;
    Problem problem;
    problem.inputs = {lab.random().uniform({kHidden, rows}, DType::bf16).transpose(0, 1)};
    problem.out_sizes = {rows, kHidden};
    problem.out_dtype = DType::bf16;
    problem.bytes = 2.0 * static_cast<double>(rows * kHidden) * 2;
    problem.shape = fmt::format("[{}, {}]^T", kHidden, rows);
    return problem;
  };
  cases.push_back(transpose);
  return cases;
}

// The GEMM ops the lab times: matmul a [m, k] @ b [k, n], linear x [m, k] @ weight [n, k]^T,
// with or without a bias [n].
enum class GemmOp { matmul, linear, linear_bias };

// A bf16 GEMM; the table names it `name`.
Case gemm_case(std::string name, GemmOp gemm_op, int64_t m, int64_t k, int64_t n) {
  const bool linear = gemm_op != GemmOp::matmul;
  const bool bias = gemm_op == GemmOp::linear_bias;
  Case test_case;
  test_case.name = std::move(name);
  test_case.op = linear ? "linear" : "matmul";
  test_case.make = [=](Lab& lab, bool small) {
    const int64_t cols = small ? 256 : n;  // the check keeps M and K, trims N
    const int64_t rows = small ? std::min<int64_t>(m, 64) : m;
    Problem problem;
    problem.inputs.push_back(lab.random().uniform({rows, k}, DType::bf16));
    problem.inputs.push_back(linear ? lab.random().uniform({cols, k}, DType::bf16)
                                    : lab.random().uniform({k, cols}, DType::bf16));
    if (bias) problem.inputs.push_back(lab.random().uniform({cols}, DType::bf16));
    problem.out_sizes = {rows, cols};
    problem.out_dtype = DType::bf16;
    for (const Tensor& input : problem.inputs) problem.bytes += bytes_of(input);
    problem.bytes += static_cast<double>(rows * cols) * 2;
    problem.flops =
        2.0 * static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(k);
    problem.shape = fmt::format("[{}, {}] @ [{}, {}]{}", rows, k, linear ? cols : k,
                                linear ? k : cols, linear ? "^T" : "");
    return problem;
  };
  return test_case;
}

// Llama 3.2 1B: hidden size 2048; its decode steps run linears of 1 to 32 rows (no bias), and
// the lm_head projects onto the 128256-token vocabulary.
constexpr int64_t kLlama1bHidden = 2048;

std::vector<Case> gemm_cases() {
  return {
      gemm_case("matmul M=1", GemmOp::matmul, 1, kHidden, kHidden),
      gemm_case("matmul M=32", GemmOp::matmul, 32, kHidden, kHidden),
      gemm_case("matmul M=4096", GemmOp::matmul, 4096, kHidden, kHidden),
      gemm_case("linear+bias M=4096", GemmOp::linear_bias, 4096, kHidden, kHidden),
      gemm_case("linear M=1", GemmOp::linear, 1, kLlama1bHidden, kLlama1bHidden),
      gemm_case("linear M=32", GemmOp::linear, 32, kLlama1bHidden, kLlama1bHidden),
      gemm_case("linear+bias M=32", GemmOp::linear_bias, 32, kLlama1bHidden, kLlama1bHidden),
      gemm_case("lm_head M=32", GemmOp::linear, 32, kLlama1bHidden, kVocab),
  };
}

int run_lab(const LabArgs& args) {
  const Device device = args.device;
  DeviceBackend& gpu = backend(device);
  const auto [total_bytes, free_bytes] = gpu.memory_info(device.index);
  fmt::print("kernel_lab on {} ({}): {:.1f} GiB free of {:.1f} GiB\n", device.str(),
             gpu.device_name(device.index), free_bytes / 1073741824.0, total_bytes / 1073741824.0);
  Lab lab(args);
  if (!args.skip_timing) lab.measure_ceilings();
  for (const auto& family : {pointwise_cases(), reduce_cases(), gather_cases(), gemm_cases()}) {
    for (const Case& test_case : family) {
      run_case(lab, test_case, !args.skip_timing);
      gpu.allocator(device.index).empty_cache();  // large problems one after another
    }
  }
  const bool passed = lab.print_table();
  const MemoryStats stats = gpu.allocator(device.index).stats();
  fmt::print("\nallocator: peak {:.2f} GiB, {} device allocations\n",
             stats.peak_bytes / 1073741824.0, stats.num_device_allocations);
  if (!passed) fmt::print("some kernels FAILED their float64 check\n");
  return passed ? 0 : 2;
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  return tessera::lab::lab_main("kernel_lab", "times every GPU kernel family against the ceilings",
                                argc, argv, tessera::lab::run_lab);
}
