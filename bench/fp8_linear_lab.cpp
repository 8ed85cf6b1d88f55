// FP8 linear lab: fp8_linear on the GPU (kernels/cuda/gemm/fp8_linear.cu: x quantized to e4m3,
// then the tensor-core gemv up to 16 rows or cuBLASLt's FP8 matmul) against the CPU kernel
// (itself checked against float64 by the op conformance test), per weight scale layout and
// activation scale; then timed at Llama-3.2-1B and Llama-3.1-8B shapes beside the bf16 linear:
// GB/s of the weight bytes against the copy bandwidth, TFLOP/s against the bf16 GEMM.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "bench/lab_harness.h"
#include "compile/ops/ops.h"
#include "runtime/float8.h"
#include "runtime/kernel_registry.h"

namespace tessera::lab {
namespace {

struct Shape3 {
  const char* name;
  int64_t n, k;
};
// Llama-3.2-1B and Llama-3.1-8B projections (q/k/v stacked, gate/up stacked).
constexpr Shape3 kShapes[] = {{"1b qkv", 3072, 2048},      {"1b o", 2048, 2048},
                              {"1b gate_up", 16384, 2048}, {"1b down", 2048, 8192},
                              {"8b qkv", 6144, 4096},      {"8b gate_up", 28672, 4096},
                              {"8b down", 4096, 14336}};

// Random e4m3 codes (no NaN) and positive scales for a weight [n, k].
struct Fp8Weight {
  Tensor codes, scales;
};
Fp8Weight random_weight(LabRandom& random, int64_t n, int64_t k, bool block_scaled) {
  std::uniform_int_distribution<int> code(0, 253);
  Tensor codes = Tensor::empty({n, k}, DType::f8_e4m3);
  auto* bytes = codes.data<uint8_t>();
  // One random block of codes tiled: as good as fresh data for timing, and quick to make.
  std::vector<uint8_t> block(4096);
  for (uint8_t& value : block) {
    value = static_cast<uint8_t>(code(random.generator()));
    if ((value & 0x7f) == 0x7f) value = 0x7e;
  }
  for (int64_t i = 0; i < n * k; ++i) bytes[i] = block[static_cast<size_t>(i % 4093)];
  const Shape scale_shape = block_scaled ? Shape{(n + 127) / 128, (k + 127) / 128} : Shape{n};
  return {codes.to(random.device()), random.uniform(scale_shape, DType::f32, 1e-3, 4e-3)};
}

int check_cases(LabRandom& random) {
  struct Case {
    int64_t m, n, k;
    bool block_scaled;
    const char* activation;
  };
  // Rows for the tensor-core gemv (up to 16, in tiles of 8) and for cuBLASLt (32, 33 and 130:
  // padded to multiples of 4); block
  // rows of 1, 2, 3, 4 and 5 blocks of 128 columns (cuBLASLt reads them padded to 4).
  const Case cases[] = {{1, 384, 256, true, "group"},   {5, 256, 384, true, "group"},
                        {20, 256, 384, true, "group"},  {32, 512, 256, false, "token"},
                        {9, 512, 384, true, "group"},   {64, 512, 384, true, "group"},
                        {300, 256, 512, true, "group"}, {130, 384, 640, true, "group"},
                        {3, 272, 144, true, "token"},   {64, 256, 256, true, "token"},
                        {33, 256, 128, true, "token"},  {1, 96, 160, false, "token"},
                        {8, 256, 512, false, "token"},  {33, 256, 512, false, "token"},
                        {2, 128, 256, false, "fixed"},  {129, 128, 256, false, "fixed"},
                        {16, 256, 256, true, "fixed"}};
  int failures = 0;
  for (const Case& c : cases) {
    for (DType dtype : {DType::bf16, DType::f32}) {
      const Fp8Weight weight = random_weight(random, c.n, c.k, c.block_scaled);
      const Tensor x = random.uniform({c.m, c.k}, dtype, -2.0, 2.0);
      std::optional<Tensor> fixed;
      if (std::string(c.activation) == "fixed") fixed = random.uniform({1}, DType::f32, 0.01, 0.02);
      Tensor got;
      try {
        got = ops::fp8_linear(x, weight.codes, weight.scales, c.activation, fixed).to(kCPU);
      } catch (const std::exception& error) {
        fmt::print("check m {:4} n {:5} k {:5}: FAILED: {}\n", c.m, c.n, c.k, error.what());
        ++failures;
        continue;
      }
      std::optional<Tensor> fixed_host;
      if (fixed) fixed_host = fixed->to(kCPU);
      const Tensor expected = ops::fp8_linear(x.to(kCPU), weight.codes.to(kCPU),
                                              weight.scales.to(kCPU), c.activation, fixed_host);
      const std::vector<float> a = got.to_floats(), b = expected.to_floats();
      double largest = 0, worst = 0;
      for (float value : b) largest = std::max<double>(largest, std::fabs(value));
      for (size_t i = 0; i < a.size(); ++i) worst = std::max<double>(worst, std::fabs(a[i] - b[i]));
      // Both quantize x to the same codes; sums differ in order, FP8 tensor cores sum in a
      // narrower accumulator, and bf16 rounds the output.
      const double allowed = largest * (dtype == DType::f32 ? 1e-3 : 8e-3);
      const bool passed = worst <= allowed;
      failures += passed ? 0 : 1;
      fmt::print("check m {:4} n {:5} k {:5} {:7} {:5} {:4}: max |gpu - cpu| {:.3e} of {:.3e} {}\n",
                 c.m, c.n, c.k, c.block_scaled ? "block" : "channel", c.activation,
                 dtype_name(dtype), worst, largest, passed ? "ok" : "FAILED");
    }
  }
  return failures;
}

void time_cases(const LabArgs& args, LabRandom& random) {
  LabTimer timer(args.device, args.samples());
  const Ceilings ceilings = measure_ceilings(timer, random, true);
  fmt::print("copy bandwidth {:.0f} GB/s, bf16 GEMM {:.0f} TFLOP/s\n", ceilings.copy_gb_per_s,
             ceilings.gemm_tflops);
  fmt::print("{:12} {:>5} | {:>9} {:>7} | {:>9} {:>7} {:>6} | {:>9} {:>7} {:>6} | {:>6}\n", "shape",
             "m", "bf16 us", "GB/s", "fp8ch us", "GB/s", "copy%", "fp8bl us", "TFLOP/s", "copy%",
             "bf16/ch");
  for (const Shape3& shape : kShapes) {
    for (int64_t m : {1, 8, 16, 32, 128, 512, 2048}) {
      const std::string name = fmt::format("{} m{}", shape.name, m);
      if (!args.selects(name)) continue;
      const Tensor x = random.uniform({m, shape.k}, DType::bf16);
      const Tensor dense = random.uniform({shape.n, shape.k}, DType::bf16, -0.05, 0.05);
      const Fp8Weight channel = random_weight(random, shape.n, shape.k, false);
      const Fp8Weight block = random_weight(random, shape.n, shape.k, true);
      const double bf16_us = timer.median_graph_us([&](int) { ops::linear(x, dense); }, 20);
      const double channel_us = timer.median_graph_us(
          [&](int) { ops::fp8_linear(x, channel.codes, channel.scales, "token"); }, 20);
      const double block_us = timer.median_graph_us(
          [&](int) { ops::fp8_linear(x, block.codes, block.scales, "group"); }, 20);
      const double weight_bytes = static_cast<double>(shape.n * shape.k);
      const double flops = 2.0 * static_cast<double>(m * shape.n * shape.k);
      const Achieved dense_rate = achieved(ceilings, 2 * weight_bytes, flops, bf16_us);
      const Achieved channel_rate = achieved(ceilings, weight_bytes, flops, channel_us);
      const Achieved block_rate = achieved(ceilings, weight_bytes, flops, block_us);
      fmt::print(
          "{:12} {:5} | {:9.2f} {:7.0f} | {:9.2f} {:7.0f} {:5.1f}% | {:9.2f} {:7.1f} {:5.1f}% | "
          "{:5.2f}x\n",
          shape.name, m, bf16_us, dense_rate.gb_per_s, channel_us, channel_rate.gb_per_s,
          channel_rate.copy_percent, block_us, block_rate.tflops, block_rate.copy_percent,
          bf16_us / channel_us);
    }
  }
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  using namespace tessera::lab;
  return lab_main(
      "fp8_linear_lab",
      "fp8_linear on the GPU against the CPU kernel, then timed beside the bf16 linear", argc, argv,
      [](const LabArgs& args) {
        LabRandom random(args.device);
        const int failures = args.skip_checks ? 0 : check_cases(random);
        if (!args.skip_timing) time_cases(args, random);
        return failures == 0 ? 0 : 1;
      },
      /*names_cases=*/true);
}
