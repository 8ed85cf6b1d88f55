// Portable GEMM lab: Tessera's own GEMM kernels (kernels/cuda/gemm/portable_gemm.h), which are the
// HIP module's matmul and linear, run here on an NVIDIA GPU through the CUDA module next to
// cuBLASLt (the CUDA module's linear) on the same problems. Versions: `skinny` (one warp per output
// column, for decode batches of 1 to 8 rows) set against the copy ceiling, `tiled` (64 x 64
// tiles, f32 FMA) against the GEMM ceiling, and `cublasLt` for scale. Each version is first
// checked against the float64 reference on a small problem of the same kind, so a fast wrong
// kernel shows as FAIL in the same table. Harness, timing and ceilings: bench/lab_harness.h.
//
//   portable_gemm_lab [--device cuda:N] [--quick] [--skip-timing]
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/lab_harness.h"
#include "kernels/cuda/gemm/portable_gemm.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor.h"

namespace tessera::lab {
namespace {

constexpr double kNearZero = 1e-3;

enum class Version { skinny, tiled, cublas_lt };

const char* version_name(Version version) {
  switch (version) {
    case Version::skinny:
      return "skinny";
    case Version::tiled:
      return "tiled";
    case Version::cublas_lt:
      return "cublasLt";
  }
  return "?";
}

void run_linear(Version version, const Tensor& x, const Tensor& weight, Tensor& out) {
  if (version == Version::cublas_lt) {
    const Tensor inputs[] = {x, weight};
    run_kernel("linear", out.device().type, KernelArgs{inputs, Attributes{}, std::span(&out, 1)});
    return;
  }
  gpu::portable_linear(x, weight, nullptr, out,
                       version == Version::skinny ? gpu::PortableGemmKernel::skinny
                                                  : gpu::PortableGemmKernel::tiled);
}

struct Shape3 {
  int64_t m, n, k;
};

struct Row {
  std::string version;
  std::string shape;
  double us = 0;
  double bytes = 0;
  double flops = 0;
  double cublas_us = 0;
  Check check;
};

// linear x[m, k] @ weight[n, k]^T in bf16: checked at `small`, timed at `large`.
Row run_case(LabRandom& random, LabTimer& timer, Version version, Shape3 small, Shape3 large,
             bool timing) {
  Row row;
  row.version = version_name(version);
  {
    Tensor x = random.uniform({small.m, small.k}, DType::bf16);
    Tensor weight = random.uniform({small.n, small.k}, DType::bf16);
    Tensor out = Tensor::empty({small.m, small.n}, DType::bf16, random.device());
    run_linear(version, x, weight, out);
    const Tensor inputs[] = {x, weight};
    row.check = compare(out, reference_outputs("linear", inputs, Attributes{})[0], kNearZero);
  }
  row.shape = fmt::format("[{}, {}] x [{}, {}]^T", large.m, large.k, large.n, large.k);
  if (!timing) return row;
  Tensor x = random.uniform({large.m, large.k}, DType::bf16);
  Tensor weight = random.uniform({large.n, large.k}, DType::bf16);
  Tensor out = Tensor::empty({large.m, large.n}, DType::bf16, random.device());
  row.us = timer.median_us([&](int) { run_linear(version, x, weight, out); });
  row.bytes = static_cast<double>(x.nbytes() + weight.nbytes() + out.nbytes());
  row.flops = 2.0 * static_cast<double>(large.m) * static_cast<double>(large.n) *
              static_cast<double>(large.k);
  return row;
}

int run_lab(const LabArgs& args) {
  const Device device = args.device;
  TESSERA_REQUIRE(device.type == DeviceType::cuda,
                  "portable_gemm_lab runs the kernels through the CUDA module; {} is not a CUDA "
                  "device",
                  device.str());
  DeviceBackend& gpu = backend(device);
  fmt::print("portable_gemm_lab on {} ({})\n", device.str(), gpu.device_name(device.index));
  LabRandom random(device);
  LabTimer timer(device, args.samples());
  Ceilings ceilings;
  if (!args.skip_timing) ceilings = measure_ceilings(timer, random, true);

  struct Case {
    Version version;
    Shape3 small, large;
  };
  std::vector<Case> cases;
  // Decode: a Llama-8B projection (4096 x 4096) and its MLP up projection (14336 x 4096).
  for (int64_t rows : {1, 4, 8}) {
    for (Shape3 large : {Shape3{rows, 4096, 4096}, Shape3{rows, 14336, 4096}}) {
      for (Version version : {Version::skinny, Version::tiled, Version::cublas_lt})
        cases.push_back({version, {rows, 96, 520}, large});
    }
  }
  // Prefill: 512 and 2048 tokens through the 4096 x 4096 projection.
  for (int64_t rows : {512, 2048}) {
    for (Version version : {Version::tiled, Version::cublas_lt})
      cases.push_back({version, {70, 96, 200}, {rows, 4096, 4096}});
  }

  std::vector<Row> rows;
  for (const Case& test_case : cases) {
    rows.push_back(run_case(random, timer, test_case.version, test_case.small, test_case.large,
                            !args.skip_timing));
    gpu.allocator(device.index).empty_cache();
  }
  // Each shape's cuBLASLt time, for the last column.
  for (Row& row : rows) {
    for (const Row& other : rows)
      if (other.version == std::string("cublasLt") && other.shape == row.shape)
        row.cublas_us = other.us;
  }

  fmt::print("{:<9} {:<30} {:>10} {:>8} {:>8} {:>9} {:>9}  {}\n", "version", "shape (bf16)",
             "time us", "GB/s", "TFLOP/s", "roofline", "cuBLASLt", "check (worst / allowed)");
  bool passed = true;
  for (const Row& row : rows) {
    passed = passed && row.check.passed;
    const char* verdict = row.check.passed ? "ok" : "FAIL";
    if (row.us == 0) {
      fmt::print("{:<9} {:<30} {:>59} {} ({:.2f})\n", row.version, row.shape, "", verdict,
                 row.check.worst);
      continue;
    }
    const Achieved rates = achieved(ceilings, row.bytes, row.flops, row.us);
    fmt::print("{:<9} {:<30} {:>10.1f} {:>8.0f} {:>8.1f} {:>5.0f}% {:<3} {:>8.2f}x  {} ({:.2f})\n",
               row.version, row.shape, row.us, rates.gb_per_s, rates.tflops, rates.roofline_percent,
               rates.bound, row.cublas_us > 0 ? row.us / row.cublas_us : 0.0, verdict,
               row.check.worst);
  }
  fmt::print("(cuBLASLt column: time over cuBLASLt's on the same shape)\n");
  if (!passed) fmt::print("some versions FAILED their float64 check\n");
  return passed ? 0 : 2;
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  return tessera::lab::lab_main("portable_gemm_lab",
                                "times Tessera's portable GEMMs (the HIP module's) on CUDA", argc,
                                argv, tessera::lab::run_lab);
}
