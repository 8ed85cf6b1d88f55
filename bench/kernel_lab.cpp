// Kernel lab (the llm.c dev/cuda habit): measures the GPU's ceilings (device-to-device copy
// bandwidth, large bf16 GEMM throughput through cuBLAS), then times every GPU kernel family at LLM
// sizes and prints a table: kernel, shape, dtype, time, GB/s, TFLOP/s and percent of the roofline
// (the time the ceilings allow for the kernel's bytes and FLOPs, over the measured time). Before
// timing, each kernel is checked against a float64 CPU reference on a small problem with the same
// row length, so a fast wrong kernel shows up as FAIL in the same table.
//
//   kernel_lab [--quick]     (--quick: fewer samples)
//
// Times are medians of event-timed samples after warm-up; each sample runs the kernel enough
// times back to back to span about a millisecond, so event resolution does not matter.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <vector>

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

// ---- Comparing against the float64 reference.

struct Reference {
  std::vector<double> expected;
  // Per element, the sum of |terms| that were accumulated (sums, dot products); rounding error
  // of an f32 accumulation scales with it. Empty for ops that accumulate nothing.
  std::vector<double> magnitude;
};

struct Check {
  bool passed = true;
  double worst = 0;  // max over elements of |got - expected| / allowed
};

// Allowed error: rtol * |expected| (output rounding and f32 math), a tiny atol, plus 2^-20 of the
// accumulated magnitude (f32 accumulation over up to a few thousand terms).
Check compare(const std::vector<double>& got, const Reference& reference, DType dtype) {
  double rtol = 0;
  switch (dtype) {
    case DType::f32:
      rtol = 1e-5;
      break;
    case DType::f16:
      rtol = 2e-3;
      break;
    case DType::bf16:
      rtol = 1.6e-2;
      break;
    default:
      rtol = 0;
      break;  // integers: exact
  }
  const double atol = rtol * 1e-3;  // results are compared relatively down to tiny values
  Check check;
  TESSERA_CHECK(got.size() == reference.expected.size(), "{} results for {} expected values",
                got.size(), reference.expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double expected = reference.expected[i];
    if (std::isnan(expected) && std::isnan(got[i])) continue;
    double allowed = atol + rtol * std::fabs(expected);
    if (!reference.magnitude.empty()) allowed += std::ldexp(reference.magnitude[i], -20);
    const double error = std::fabs(got[i] - expected);
    if (!(error <= allowed)) check.passed = false;  // NaN fails
    const double ratio = allowed > 0 ? error / allowed : (error == 0 ? 0 : INFINITY);
    check.worst = std::max(check.worst, std::isnan(ratio) ? INFINITY : ratio);
  }
  return check;
}

// ---- The lab: device, random data, timing, the table.

struct Row {
  std::string kernel;
  std::string shape;
  std::string dtype;
  double us = 0;
  double bytes = 0;
  double flops = 0;
  Check check;
};

class Lab {
 public:
  Lab(Device device, int samples)
      : device_(device), backend_(backend(device)), samples_(samples), rng_(20240611) {}

  Device device() const { return device_; }

  // Uniform random values in [low, high), rounded through `dtype`. Large tensors tile one random
  // block on the device, which is as good as fresh data for timing and far faster to make.
  Tensor random(const Shape& sizes, DType dtype, double low = -1.0, double high = 1.0) {
    const int64_t numel = shape_numel(sizes);
    constexpr int64_t kBlock = int64_t{1} << 22;
    std::uniform_real_distribution<float> uniform(static_cast<float>(low),
                                                  static_cast<float>(high));
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

  Tensor random_ids(const Shape& sizes, DType dtype, int64_t vocab) {
    std::uniform_int_distribution<int64_t> uniform(0, vocab - 1);
    std::vector<int64_t> values(static_cast<size_t>(shape_numel(sizes)));
    for (int64_t& value : values) value = uniform(rng_);
    return Tensor::from_ints(values, sizes, dtype, device_);
  }

  // i32 with about half the values nonzero.
  Tensor random_condition(const Shape& sizes) {
    std::uniform_int_distribution<int64_t> uniform(0, 1);
    std::vector<int64_t> values(static_cast<size_t>(shape_numel(sizes)));
    for (int64_t& value : values) value = uniform(rng_) * 7;
    return Tensor::from_ints(values, sizes, DType::i32, device_);
  }

  void run(const std::string& op, std::span<const Tensor> inputs, const Attributes& attributes,
           Tensor& out) {
    run_kernel(op, device_.type, KernelArgs{inputs, attributes, std::span(&out, 1)});
  }

  // Median microseconds per call of `launch`.
  double time_us(const std::function<void()>& launch) {
    Stream& stream = backend_.current_stream(device_.index);
    for (int i = 0; i < 3; ++i) launch();  // first-call costs: BLAS heuristics, workspaces
    stream.synchronize();
    auto start = backend_.create_event(device_.index);
    auto end = backend_.create_event(device_.index);
    start->record(stream);
    launch();
    end->record(stream);
    end->synchronize();
    const double single_ms = std::max<double>(start->elapsed_ms(*end), 1e-4);
    const int repeats = std::clamp(static_cast<int>(std::ceil(1.0 / single_ms)), 1, 1000);
    std::vector<double> samples;
    for (int sample = 0; sample < samples_; ++sample) {
      start->record(stream);
      for (int i = 0; i < repeats; ++i) launch();
      end->record(stream);
      end->synchronize();
      samples.push_back(1000.0 * start->elapsed_ms(*end) / repeats);
    }
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    return samples[samples.size() / 2];
  }

  // The bandwidth ceiling: a 1 GiB device-to-device copy (read + write counted). The compute
  // ceiling: an 8192^3 bf16 GEMM through the matmul kernel (cuBLAS).
  void measure_ceilings() {
    constexpr int64_t kCopyElements = int64_t{1} << 29;  // 1 GiB of bf16
    Tensor source = random({kCopyElements}, DType::bf16);
    Tensor destination = Tensor::empty({kCopyElements}, DType::bf16, device_);
    const double copy_us = time_us([&] {
      backend_.copy(destination.data_ptr(), device_, source.data_ptr(), device_, source.nbytes());
    });
    copy_gb_per_s_ = 2.0 * static_cast<double>(source.nbytes()) / (copy_us * 1e-6) / kGB;

    constexpr int64_t kSide = 8192;
    Tensor a = random({kSide, kSide}, DType::bf16);
    Tensor b = random({kSide, kSide}, DType::bf16);
    Tensor c = Tensor::empty({kSide, kSide}, DType::bf16, device_);
    const Tensor inputs[] = {a, b};
    const double gemm_us = time_us([&] { run("matmul", inputs, Attributes{}, c); });
    gemm_tflops_ = 2.0 * kSide * kSide * kSide / (gemm_us * 1e-6) / kTera;
    fmt::print(
        "ceilings: device-to-device copy {:.0f} GB/s (1 GiB, read + write), bf16 GEMM "
        "{:.0f} TFLOP/s (8192^3, cuBLAS)\n\n",
        copy_gb_per_s_, gemm_tflops_);
  }

  void add(Row row) { rows_.push_back(std::move(row)); }

  bool print_table() const {
    fmt::print("{:<22} {:<32} {:<9} {:>10} {:>9} {:>9} {:>9}  {}\n", "kernel", "shape", "dtype",
               "time us", "GB/s", "TFLOP/s", "roofline", "check (worst error / allowed)");
    bool all_passed = true;
    for (const Row& row : rows_) {
      const double seconds = row.us * 1e-6;
      const double memory_time = row.bytes / (copy_gb_per_s_ * kGB);
      const double compute_time = row.flops / (gemm_tflops_ * kTera);
      const double ideal = std::max(memory_time, compute_time);
      const char* bound = compute_time > memory_time ? "flop" : "mem";
      fmt::print("{:<22} {:<32} {:<9} {:>10.1f} {:>9.0f} {:>9.1f} {:>5.0f}% {:<4} {} ({:.2f})\n",
                 row.kernel, row.shape, row.dtype, row.us, row.bytes / seconds / kGB,
                 row.flops / seconds / kTera, 100.0 * ideal / seconds, bound,
                 row.check.passed ? "ok" : "FAIL", row.check.worst);
      all_passed = all_passed && row.check.passed;
    }
    return all_passed;
  }

 private:
  Device device_;
  DeviceBackend& backend_;
  int samples_;
  std::mt19937_64 rng_;
  double copy_gb_per_s_ = 1;
  double gemm_tflops_ = 1;
  std::vector<Row> rows_;
};

// ---- Cases: one problem maker (small for the check, large for timing) and one reference.

struct Problem {
  std::vector<Tensor> inputs;  // as the kernel gets them (broadcast inputs expanded)
  Shape out_sizes;
  DType out_dtype = DType::f32;
  std::string shape;  // for the table
  double bytes = 0;   // bytes a perfect kernel moves
  double flops = 0;
};

using ReferenceFn =
    std::function<Reference(const Problem&, const std::vector<std::vector<double>>& inputs)>;

struct Case {
  std::string name;  // table label
  std::string op;
  Attributes attributes;
  std::function<Problem(Lab&, bool small)> make;
  ReferenceFn reference;
};

double bytes_of(const Tensor& tensor) {
  return static_cast<double>(tensor.nbytes());
}

void run_case(Lab& lab, const Case& test_case) {
  Row row;
  row.kernel = test_case.name;
  {
    Problem small = test_case.make(lab, true);
    Tensor out = Tensor::empty(small.out_sizes, small.out_dtype, lab.device());
    lab.run(test_case.op, small.inputs, test_case.attributes, out);
    std::vector<std::vector<double>> inputs;
    for (const Tensor& input : small.inputs) inputs.push_back(input.to_doubles());
    row.check = compare(out.to_doubles(), test_case.reference(small, inputs), small.out_dtype);
  }
  Problem large = test_case.make(lab, false);
  Tensor out = Tensor::empty(large.out_sizes, large.out_dtype, lab.device());
  row.us = lab.time_us([&] { lab.run(test_case.op, large.inputs, test_case.attributes, out); });
  row.shape = large.shape;
  row.dtype = dtype_name(large.out_dtype);
  row.bytes = large.bytes;
  row.flops = large.flops;
  lab.add(std::move(row));
}

// Elementwise reference over inputs of the output's shape.
ReferenceFn elementwise(std::function<double(std::span<const double>)> fn) {
  return [fn](const Problem&, const std::vector<std::vector<double>>& inputs) {
    Reference reference;
    const size_t count = inputs[0].size();
    std::vector<double> arguments(inputs.size());
    for (size_t i = 0; i < count; ++i) {
      for (size_t k = 0; k < inputs.size(); ++k) arguments[k] = inputs[k][i];
      reference.expected.push_back(fn(arguments));
    }
    return reference;
  };
}

// Row reference over the input's last dim: fn(row, &out_values, &magnitudes).
ReferenceFn per_row(std::function<void(std::span<const double>, Reference&)> fn) {
  return [fn](const Problem& problem, const std::vector<std::vector<double>>& inputs) {
    Reference reference;
    const auto cols = static_cast<size_t>(problem.inputs[0].size(-1));
    for (size_t begin = 0; begin < inputs[0].size(); begin += cols) {
      fn(std::span<const double>(inputs[0]).subspan(begin, cols), reference);
    }
    return reference;
  };
}

constexpr int64_t kRows = 4096;
constexpr int64_t kHidden = 4096;
constexpr int64_t kVocab = 128256;

// A pointwise case over [rows, hidden]: `inputs` random tensors in [low, high), plus optional
// broadcast of the second input along rows.
Case pointwise_case(std::string name, std::string op, Attributes attributes, int inputs, double low,
                    double high, std::function<double(std::span<const double>)> fn,
                    bool broadcast_second = false) {
  Case test_case;
  test_case.name = std::move(name);
  test_case.op = std::move(op);
  test_case.attributes = std::move(attributes);
  test_case.make = [=](Lab& lab, bool small) {
    const Shape sizes{small ? 16 : kRows, kHidden};
    Problem problem;
    for (int i = 0; i < inputs; ++i) {
      if (i == 1 && broadcast_second) {
        Tensor row = lab.random({kHidden}, DType::bf16, low, high);
        problem.bytes += bytes_of(row);
        problem.inputs.push_back(row.expand(sizes));
      } else {
        problem.inputs.push_back(lab.random(sizes, DType::bf16, low, high));
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
  test_case.reference = elementwise(std::move(fn));
  return test_case;
}

double gelu_erf(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double gelu_tanh(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

std::vector<Case> pointwise_cases() {
  using Args = std::span<const double>;
  std::vector<Case> cases;
  cases.push_back(pointwise_case("silu", "silu", {}, 1, -6, 6,
                                 [](Args x) { return x[0] / (1.0 + std::exp(-x[0])); }));
  cases.push_back(pointwise_case("gelu(none)", "gelu", {{"approximate", std::string("none")}}, 1,
                                 -4, 4, [](Args x) { return gelu_erf(x[0]); }));
  cases.push_back(pointwise_case("gelu(tanh)", "gelu", {{"approximate", std::string("tanh")}}, 1,
                                 -4, 4, [](Args x) { return gelu_tanh(x[0]); }));
  cases.push_back(
      pointwise_case("exp", "exp", {}, 1, -4, 4, [](Args x) { return std::exp(x[0]); }));
  cases.push_back(pointwise_case("rsqrt", "rsqrt", {}, 1, 0.1, 4,
                                 [](Args x) { return 1.0 / std::sqrt(x[0]); }));
  cases.push_back(pointwise_case("pow_scalar(2)", "pow_scalar", {{"exponent", 2.0}}, 1, -2, 2,
                                 [](Args x) { return x[0] * x[0]; }));
  cases.push_back(pointwise_case("mul_scalar", "mul_scalar", {{"scalar", 0.125}}, 1, -2, 2,
                                 [](Args x) { return x[0] * 0.125; }));
  cases.push_back(pointwise_case("add", "add", {}, 2, -2, 2, [](Args x) { return x[0] + x[1]; }));
  cases.push_back(pointwise_case(
      "mul (row broadcast)", "mul", {}, 2, -2, 2, [](Args x) { return x[0] * x[1]; },
      /*broadcast_second=*/true));
  cases.push_back(pointwise_case("div", "div", {}, 2, 0.5, 2, [](Args x) { return x[0] / x[1]; }));
  cases.push_back(pointwise_case("maximum", "maximum", {}, 2, -2, 2,
                                 [](Args x) { return std::max(x[0], x[1]); }));

  Case where;
  where.name = "where";
  where.op = "where";
  where.make = [](Lab& lab, bool small) {
    const Shape sizes{small ? 16 : kRows, kHidden};
    Problem problem;
    problem.inputs = {lab.random_condition(sizes), lab.random(sizes, DType::bf16),
                      lab.random(sizes, DType::bf16)};
    for (const Tensor& input : problem.inputs) problem.bytes += bytes_of(input);
    problem.out_sizes = sizes;
    problem.out_dtype = DType::bf16;
    problem.bytes += static_cast<double>(shape_numel(sizes)) * 2;
    problem.shape = shape_str(sizes) + " i32 cond";
    return problem;
  };
  where.reference = elementwise([](Args x) { return x[0] != 0 ? x[1] : x[2]; });
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
      problem.inputs = {lab.random(sizes, from, -100, 100)};
      problem.out_sizes = sizes;
      problem.out_dtype = to;
      problem.bytes =
          bytes_of(problem.inputs[0]) + static_cast<double>(shape_numel(sizes) * element_size(to));
      problem.shape = shape_str(sizes);
      return problem;
    };
    cast.reference =
        elementwise([to](Args x) { return to == DType::i32 ? std::trunc(x[0]) : x[0]; });
    cases.push_back(cast);
  }
  return cases;
}

// A last-dim reduction or softmax over [rows, cols]; the check uses a few rows of the same
// length, so it runs the same kernel variant as the timed problem.
Case row_case(std::string name, std::string op, int64_t rows, int64_t cols, DType dtype,
              DType out_dtype, bool reduces, ReferenceFn reference) {
  Case test_case;
  test_case.name = std::move(name);
  test_case.op = std::move(op);
  test_case.make = [=](Lab& lab, bool small) {
    const int64_t row_count = small ? 4 : rows;
    Problem problem;
    problem.inputs = {lab.random({row_count, cols}, dtype, -3, 3)};
    problem.out_sizes = reduces ? Shape{row_count} : Shape{row_count, cols};
    problem.out_dtype = out_dtype;
    problem.bytes = bytes_of(problem.inputs[0]) +
                    static_cast<double>(shape_numel(problem.out_sizes) * element_size(out_dtype));
    problem.shape = shape_str(Shape{row_count, cols});
    return problem;
  };
  test_case.reference = std::move(reference);
  return test_case;
}

std::vector<Case> reduce_cases() {
  using Values = std::span<const double>;
  auto sum = per_row([](Values row, Reference& out) {
    double total = 0;
    double magnitude = 0;
    for (double value : row) {
      total += value;
      magnitude += std::fabs(value);
    }
    out.expected.push_back(total);
    out.magnitude.push_back(magnitude);
  });
  auto mean = per_row([](Values row, Reference& out) {
    double total = 0;
    double magnitude = 0;
    for (double value : row) {
      total += value;
      magnitude += std::fabs(value);
    }
    out.expected.push_back(total / static_cast<double>(row.size()));
    out.magnitude.push_back(magnitude / static_cast<double>(row.size()));
  });
  auto max = per_row([](Values row, Reference& out) {
    out.expected.push_back(*std::max_element(row.begin(), row.end()));
  });
  auto argmax = per_row([](Values row, Reference& out) {
    out.expected.push_back(
        static_cast<double>(std::max_element(row.begin(), row.end()) - row.begin()));
  });
  auto softmax = per_row([](Values row, Reference& out) {
    const double max_value = *std::max_element(row.begin(), row.end());
    double total = 0;
    for (double value : row) total += std::exp(value - max_value);
    for (double value : row) out.expected.push_back(std::exp(value - max_value) / total);
  });
  const DType bf16 = DType::bf16;
  std::vector<Case> cases;
  cases.push_back(row_case("sum", "sum", kRows, kHidden, bf16, bf16, true, sum));
  cases.push_back(row_case("mean", "mean", kRows, kHidden, bf16, bf16, true, mean));
  cases.push_back(row_case("max", "max", kRows, kHidden, bf16, bf16, true, max));
  cases.push_back(row_case("argmax", "argmax", kRows, kHidden, bf16, DType::i64, true, argmax));
  cases.push_back(row_case("argmax (vocab)", "argmax", 32, kVocab, bf16, DType::i64, true, argmax));
  cases.push_back(row_case("softmax", "softmax", kRows, kHidden, bf16, bf16, false, softmax));
  cases.push_back(
      row_case("softmax (short rows)", "softmax", kRows * 8, 512, bf16, bf16, false, softmax));
  cases.push_back(
      row_case("softmax (vocab)", "softmax", 32, kVocab, DType::f32, DType::f32, false, softmax));
  return cases;
}

std::vector<Case> gather_cases() {
  std::vector<Case> cases;

  Case embedding;
  embedding.name = "embedding";
  embedding.op = "embedding";
  embedding.make = [](Lab& lab, bool small) {
    const int64_t vocab = small ? 1000 : kVocab;
    const int64_t count = small ? 16 : 4096;
    Problem problem;
    problem.inputs = {lab.random({vocab, kHidden}, DType::bf16),
                      lab.random_ids({count}, DType::i32, vocab)};
    problem.out_sizes = {count, kHidden};
    problem.out_dtype = DType::bf16;
    problem.bytes = 2.0 * static_cast<double>(count * kHidden) * 2 + bytes_of(problem.inputs[1]);
    problem.shape = fmt::format("[{}, {}] by {} i32 ids", vocab, kHidden, count);
    return problem;
  };
  embedding.reference = [](const Problem& problem, const std::vector<std::vector<double>>& inputs) {
    Reference reference;
    const auto width = static_cast<size_t>(problem.inputs[0].size(1));
    for (double id : inputs[1]) {
      const auto row = static_cast<size_t>(id) * width;
      reference.expected.insert(reference.expected.end(), inputs[0].begin() + row,
                                inputs[0].begin() + row + width);
    }
    return reference;
  };
  cases.push_back(embedding);

  Case cat;
  cat.name = "cat (last dim)";
  cat.op = "cat";
  cat.attributes = {{"dim", int64_t{-1}}};
  cat.make = [](Lab& lab, bool small) {
    const int64_t rows = small ? 16 : kRows;
    Problem problem;
    problem.inputs = {lab.random({rows, kHidden / 2}, DType::bf16),
                      lab.random({rows, kHidden / 2}, DType::bf16)};
    problem.out_sizes = {rows, kHidden};
    problem.out_dtype = DType::bf16;
    problem.bytes = 2.0 * static_cast<double>(rows * kHidden) * 2;
    problem.shape = fmt::format("2 x [{}, {}]", rows, kHidden / 2);
    return problem;
  };
  cat.reference = [](const Problem& problem, const std::vector<std::vector<double>>& inputs) {
    Reference reference;
    const auto half = static_cast<size_t>(problem.inputs[0].size(1));
    for (size_t row = 0; row < inputs[0].size() / half; ++row) {
      for (const auto& input : inputs) {
        reference.expected.insert(reference.expected.end(), input.begin() + row * half,
                                  input.begin() + (row + 1) * half);
      }
    }
    return reference;
  };
  cases.push_back(cat);

  Case transpose;
  transpose.name = "copy (transpose)";
  transpose.op = "copy";
  transpose.make = [](Lab& lab, bool small) {
    const int64_t rows = small ? 16 : kRows;
    Problem problem;
    problem.inputs = {lab.random({kHidden, rows}, DType::bf16).transpose(0, 1)};
    problem.out_sizes = {rows, kHidden};
    problem.out_dtype = DType::bf16;
    problem.bytes = 2.0 * static_cast<double>(rows * kHidden) * 2;
    problem.shape = fmt::format("[{}, {}]^T", kHidden, rows);
    return problem;
  };
  transpose.reference = elementwise([](std::span<const double> x) { return x[0]; });
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
    problem.inputs.push_back(lab.random({rows, k}, DType::bf16));
    problem.inputs.push_back(linear ? lab.random({cols, k}, DType::bf16)
                                    : lab.random({k, cols}, DType::bf16));
    if (bias) problem.inputs.push_back(lab.random({cols}, DType::bf16));
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
  test_case.reference = [linear, bias](const Problem& problem,
                                       const std::vector<std::vector<double>>& inputs) {
    const int64_t rows = problem.out_sizes[0];
    const int64_t cols = problem.out_sizes[1];
    const int64_t depth = problem.inputs[0].size(1);
    Reference reference;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        double total = bias ? inputs[2][j] : 0.0;
        double magnitude = std::fabs(total);
        for (int64_t p = 0; p < depth; ++p) {
          const double b = linear ? inputs[1][j * depth + p] : inputs[1][p * cols + j];
          total += inputs[0][i * depth + p] * b;
          magnitude += std::fabs(inputs[0][i * depth + p] * b);
        }
        reference.expected.push_back(total);
        reference.magnitude.push_back(magnitude);
      }
    }
    return reference;
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

int run_lab(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  Device device;
  if (!first_gpu(&device)) {
    fmt::print(stderr, "kernel_lab: no GPU device is available (this lab times GPU kernels)\n");
    return 1;
  }
  DeviceBackend& gpu = backend(device);
  const auto [total_bytes, free_bytes] = gpu.memory_info(device.index);
  fmt::print("kernel_lab on {} ({}): {:.1f} GiB free of {:.1f} GiB\n", device.str(),
             gpu.device_name(device.index), free_bytes / 1073741824.0, total_bytes / 1073741824.0);
  Lab lab(device, quick ? 5 : 21);
  lab.measure_ceilings();
  for (const auto& family : {pointwise_cases(), reduce_cases(), gather_cases(), gemm_cases()}) {
    for (const Case& test_case : family) {
      run_case(lab, test_case);
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
  tessera::log_to_stderr();
  try {
    return tessera::lab::run_lab(argc, argv);
  } catch (const std::exception& error) {
    fmt::print(stderr, "kernel_lab: {}\n", error.what());
    return 1;
  }
}
