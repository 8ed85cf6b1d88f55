#include "bench/lab_harness.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>

#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/logging.h"
#include "support/reference.h"

namespace tessera::lab {

namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

LabArgs parse_lab_args(int argc, char** argv, bool names_cases) {
  LabArgs args;
  bool device_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      args.quick = true;
    } else if (arg == "--skip-timing") {
      args.skip_timing = true;
    } else if (arg == "--device") {
      if (i + 1 >= argc) throw UsageError("--device needs a value, e.g. cuda:0");
      args.device = parse_device(argv[++i]);
      device_given = true;
    } else if (arg == "--only" && names_cases) {
      if (i + 1 >= argc || argv[i + 1][0] == '\0')
        throw UsageError("--only needs the text of the cases to run, e.g. 'gate_up M=32'");
      args.only = argv[++i];
    } else if (arg == "--skip-checks" && names_cases) {
      args.skip_checks = true;
    } else {
      throw UsageError(fmt::format("unknown argument '{}'", arg));
    }
  }
  if (!device_given && !first_gpu(&args.device))
    throw Error("no GPU device is available (this lab checks and times GPU kernels)");
  TESSERA_REQUIRE(device_available(args.device), "device {} is not available", args.device.str());
  return args;
}

// Ops that sum many products: their rounding error scales with the sum of absolute terms.
bool accumulates(const std::string& op) {
  return op == "sum" || op == "mean" || op == "matmul" || op == "linear";
}

// The reference's name for a kernel-only op: `copy` writes a strided input out contiguously.
std::string reference_name(const std::string& op) {
  return op == "copy" ? "contiguous" : op;
}

}  // namespace

int lab_main(std::string_view lab, std::string_view summary, int argc, char** argv,
             const std::function<int(const LabArgs&)>& body, bool names_cases) {
  log_to_stderr();
  try {
    LabArgs args = parse_lab_args(argc, argv, names_cases);
    return body(args);
  } catch (const UsageError& error) {
    fmt::print(stderr, "{}: {}\nusage: {} [--device cuda:N] [--quick] [--skip-timing]{}\n{}\n", lab,
               error.what(), lab, names_cases ? " [--only TEXT] [--skip-checks]" : "", summary);
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "{}: {}\n", lab, error.what());
    return 1;
  }
}

LabRandom::LabRandom(Device device, uint64_t seed) : device_(device), generator_(seed) {}

Tensor LabRandom::uniform(const Shape& sizes, DType dtype, double low, double high) {
  const int64_t numel = shape_numel(sizes);
  constexpr int64_t kBlock = int64_t{1} << 22;
  std::uniform_real_distribution<float> distribution(static_cast<float>(low),
                                                     static_cast<float>(high));
  std::vector<float> values(static_cast<size_t>(std::min(numel, kBlock)));
  for (float& value : values) value = distribution(generator_);
  if (numel <= kBlock) return Tensor::from_floats(values, sizes, dtype, device_);
  Tensor block = Tensor::from_floats(values, {kBlock}, dtype, device_);
  Tensor out = Tensor::empty(sizes, dtype, device_);
  DeviceBackend& gpu = backend(device_);
  const size_t element = element_size(dtype);
  for (int64_t begin = 0; begin < numel; begin += kBlock) {
    const int64_t count = std::min(kBlock, numel - begin);
    gpu.copy(static_cast<char*>(out.data_ptr()) + begin * element, device_, block.data_ptr(),
             device_, static_cast<size_t>(count) * element);
  }
  return out;
}

Tensor LabRandom::integers(const Shape& sizes, DType dtype, int64_t bound) {
  std::uniform_int_distribution<int64_t> distribution(0, bound - 1);
  std::vector<int64_t> values(static_cast<size_t>(shape_numel(sizes)));
  for (int64_t& value : values) value = distribution(generator_);
  return Tensor::from_ints(values, sizes, dtype, device_);
}

LabTimer::LabTimer(Device device, int samples) : device_(device), samples_(samples) {}

double LabTimer::median_us(const std::function<void(int call)>& launch) {
  DeviceBackend& gpu = backend(device_);
  Stream& stream = gpu.current_stream(device_.index);
  int call = 0;
  for (int i = 0; i < 3; ++i) launch(call++);  // first-call costs: BLAS heuristics, workspaces
  stream.synchronize();
  auto start = gpu.create_event(device_.index);
  auto end = gpu.create_event(device_.index);
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

double LabTimer::median_graph_us(const std::function<void(int call)>& launch, int calls) {
  TESSERA_CHECK(calls >= 1, "a graph of {} calls", calls);
  DeviceBackend& gpu = backend(device_);
  Stream& stream = gpu.current_stream(device_.index);
  for (int call = 0; call < calls; ++call) launch(call);  // lazy loads and plans, uncaptured
  stream.synchronize();
  gpu.begin_capture(stream);
  try {
    for (int call = 0; call < calls; ++call) launch(call);
  } catch (...) {
    try {
      (void)gpu.end_capture(stream);
    } catch (const Error&) {
    }
    throw;
  }
  std::unique_ptr<GraphExec> graph = gpu.end_capture(stream);
  graph->replay(stream);
  stream.synchronize();
  auto start = gpu.create_event(device_.index);
  auto end = gpu.create_event(device_.index);
  std::vector<double> samples;
  for (int sample = 0; sample < samples_; ++sample) {
    start->record(stream);
    graph->replay(stream);
    end->record(stream);
    end->synchronize();
    samples.push_back(1000.0 * start->elapsed_ms(*end) / calls);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

Ceilings measure_ceilings(LabTimer& timer, LabRandom& random, bool with_gemm) {
  Ceilings ceilings;
  const Device device = random.device();
  DeviceBackend& gpu = backend(device);
  {
    constexpr int64_t kCopyElements = int64_t{1} << 29;  // 1 GiB of bf16, far beyond L2
    Tensor source = random.uniform({kCopyElements}, DType::bf16);
    Tensor destination = Tensor::empty({kCopyElements}, DType::bf16, device);
    const double us = timer.median_us([&](int) {
      gpu.copy(destination.data_ptr(), device, source.data_ptr(), device, source.nbytes());
    });
    ceilings.copy_gb_per_s = 2.0 * static_cast<double>(source.nbytes()) / (us * 1e-6) / kGB;
  }
  std::string gemm_text;
  if (with_gemm) {
    constexpr int64_t kSide = 8192;
    Tensor a = random.uniform({kSide, kSide}, DType::bf16);
    Tensor b = random.uniform({kSide, kSide}, DType::bf16);
    Tensor c = Tensor::empty({kSide, kSide}, DType::bf16, device);
    const Tensor inputs[] = {a, b};
    const double us = timer.median_us([&](int) {
      run_kernel("matmul", device.type, KernelArgs{inputs, Attributes{}, std::span(&c, 1)});
    });
    ceilings.gemm_tflops = 2.0 * kSide * kSide * kSide / (us * 1e-6) / kTera;
    gemm_text = fmt::format(", bf16 GEMM {:.0f} TFLOP/s (8192^3, cuBLAS)", ceilings.gemm_tflops);
  }
  gpu.allocator(device.index).empty_cache();
  fmt::print("ceilings: device-to-device copy {:.0f} GB/s (1 GiB, read + write){}\n\n",
             ceilings.copy_gb_per_s, gemm_text);
  return ceilings;
}

Achieved achieved(const Ceilings& ceilings, double bytes, double flops, double us) {
  Achieved result;
  const double seconds = us * 1e-6;
  result.gb_per_s = bytes / seconds / kGB;
  result.tflops = flops / seconds / kTera;
  result.copy_percent = 100.0 * result.gb_per_s / ceilings.copy_gb_per_s;
  const double memory_time = bytes / (ceilings.copy_gb_per_s * kGB);
  double compute_time = 0;
  if (ceilings.gemm_tflops > 0) {
    result.gemm_percent = 100.0 * result.tflops / ceilings.gemm_tflops;
    compute_time = flops / (ceilings.gemm_tflops * kTera);
  }
  result.roofline_percent = 100.0 * std::max(memory_time, compute_time) / seconds;
  result.bound = compute_time > memory_time ? "flop" : "mem";
  return result;
}

std::vector<Expected> reference_outputs(const std::string& op, std::span<const Tensor> inputs,
                                        const Attributes& attributes) {
  std::vector<test::RefTensor> values, magnitudes;
  for (const Tensor& input : inputs) {
    test::RefTensor tensor{input.sizes(), input.to_doubles()};
    values.push_back(tensor);
    for (double& value : tensor.values) value = std::fabs(value);
    magnitudes.push_back(std::move(tensor));
  }
  const std::string name = reference_name(op);
  std::vector<test::RefTensor> expected = test::reference_op(name, values, attributes);
  std::vector<test::RefTensor> magnitude;
  if (accumulates(name)) magnitude = test::reference_op(name, magnitudes, attributes);
  std::vector<Expected> outputs;
  for (size_t i = 0; i < expected.size(); ++i) {
    outputs.push_back(Expected{std::move(expected[i].values), i < magnitude.size()
                                                                  ? std::move(magnitude[i].values)
                                                                  : std::vector<double>{}});
  }
  return outputs;
}

double relative_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 1e-5;
    case DType::f16:
      return 2e-3;
    case DType::bf16:
      return 1.6e-2;
    default:
      return 0;  // integers: exact
  }
}

Check compare(const Tensor& got, const Expected& expected, double near_zero) {
  const std::vector<double> values = got.to_doubles();
  TESSERA_CHECK(values.size() == expected.values.size(), "{} results for {} expected values",
                values.size(), expected.values.size());
  const double rtol = relative_tolerance(got.dtype());
  Check check;
  for (size_t i = 0; i < values.size(); ++i) {
    const double want = expected.values[i];
    if (std::isnan(want) && std::isnan(values[i])) continue;
    double allowed = rtol * (std::fabs(want) + near_zero);
    if (!expected.magnitude.empty()) allowed += std::ldexp(expected.magnitude[i], -20);
    const double error = std::fabs(values[i] - want);
    if (!(error <= allowed)) {  // NaN fails
      check.passed = false;
      if (check.failing++ == 0) check.first_failing = static_cast<int64_t>(i);
    }
    const double ratio = allowed > 0 ? error / allowed : (error == 0 ? 0 : INFINITY);
    check.worst = std::max(check.worst, std::isnan(ratio) ? INFINITY : ratio);
  }
  return check;
}

}  // namespace tessera::lab
