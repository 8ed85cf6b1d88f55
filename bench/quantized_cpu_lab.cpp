// CPU quantized linear lab: kernels/cpu/quantized_linear.h's decode path (dot products straight
// from the blocks against x quantized to 8 bits per block) at the shapes of the 85M-parameter
// model of bench/quantized_cpu_decode.sh and of Llama-3.2-1B, for Q8_0, Q4_K and Q6_K weights that
// Tessera's own quantizers write from random values, M in {1, 2, 8}. Each case is first checked
// against the float64 product of the dequantized weight with x as the dot products see it (scale
// times quant: only the f32 sums, 1e-5 of the sum of magnitudes, are allowed), then timed (the
// median of 15 samples of at least 20 ms each, rotating over weight copies that overflow the
// caches) on TESSERA_NUM_THREADS threads; the rate is the quantized bytes read per second, against
// the read bandwidth this machine measures over 512 MiB with the same threads.
// Usage: quantized_cpu_lab [--only TEXT] [--skip-timing]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cpu_lab.h"
#include "kernels/cpu/quantized_linear.h"
#include "kernels/quant/activation_blocks.h"
#include "kernels/quant/block_format.h"
#include "runtime/cpu/parallel.h"

namespace tessera {
namespace {

using lab::median_us;
using lab::read_bandwidth;

struct LabShape {
  const char* name;
  int64_t n, k;
};
constexpr LabShape kShapes[] = {{"85m_qkv", 2304, 768},      {"85m_o", 768, 768},
                                {"85m_gate_up", 4096, 768},  {"85m_down", 768, 2048},
                                {"1b_gate_up", 16384, 2048}, {"1b_down", 2048, 8192}};
constexpr DType kFormats[] = {DType::q8_0, DType::q4_k, DType::q6_k};
constexpr int64_t kRows[] = {1, 2, 8};
constexpr int64_t kCacheOverflowBytes = int64_t{256} << 20;

Tensor quantized_weight(DType dtype, int64_t n, int64_t k, std::mt19937_64& random) {
  std::normal_distribution<float> value(0.0f, 0.02f);
  std::vector<float> values(static_cast<size_t>(n * k));
  for (float& v : values) v = value(random);
  Tensor weight = Tensor::empty({n, k}, dtype);
  quant::quantize_blocks(dtype, values.data(), static_cast<std::byte*>(weight.data_ptr()),
                         n * k / block_elements(dtype));
  return weight;
}

// The worst |got - want| over the allowed error (1e-5 of the sum of magnitudes plus f32's
// rounding of the result), want the float64 product of the dequantized weight with x quantized
// as the kernel quantizes it.
double check(const Tensor& weight, const Tensor& x, int64_t m) {
  const int64_t n = weight.size(0), k = weight.size(1);
  const DType dtype = weight.dtype();
  std::vector<float> dequantized(static_cast<size_t>(n * k));
  quant::dequantize_blocks(dtype, static_cast<const std::byte*>(weight.data_ptr()),
                           dequantized.data(), n * k / block_elements(dtype));
  std::vector<int8_t> quants(static_cast<size_t>(m * k));
  std::vector<float> scales(static_cast<size_t>(m * k / 32));
  std::vector<int16_t> sums(static_cast<size_t>(m * k / 16));
  for (int64_t r = 0; r < m; ++r)
    quant::quantize_activation(x.data<float>() + r * k, k, block_elements(dtype),
                               quants.data() + r * k, scales.data() + r * k / 32,
                               sums.data() + r * k / 16);
  Tensor out = Tensor::empty({m, n}, DType::f32);
  cpu::quantized_linear(x, weight, nullptr, out);
  double worst = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0, magnitude = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double product =
            double{scales[(r * k + i) / 32]} * quants[r * k + i] * double{dequantized[j * k + i]};
        want += product;
        magnitude += std::fabs(product);
      }
      const double allowed = 1e-5 * magnitude + 1e-6 * std::fabs(want) + 1e-30;
      worst = std::max(worst, std::fabs(out.data<float>()[r * n + j] - want) / allowed);
    }
  return worst;
}

int run(std::string_view only, bool skip_timing) {
  std::mt19937_64 random(20261129);
  const double ceiling = skip_timing ? 0 : read_bandwidth();
  if (!skip_timing)
    fmt::print("threads {}, read bandwidth {:.1f} GB/s\n", cpu::num_threads(), ceiling);
  fmt::print("{:>5} {:>12} {:>3} {:>10} {:>8} {:>6} {:>8}\n", "fmt", "shape", "M", "us", "GB/s",
             "read%", "check");
  int failures = 0;
  for (DType dtype : kFormats)
    for (const LabShape& shape : kShapes) {
      const std::string name = fmt::format("{} {}", dtype_name(dtype), shape.name);
      if (!only.empty() && name.find(only) == std::string::npos) continue;
      std::vector<Tensor> weights{quantized_weight(dtype, shape.n, shape.k, random)};
      const int64_t bytes = static_cast<int64_t>(weights[0].nbytes());
      while (!skip_timing && static_cast<int64_t>(weights.size()) * bytes < kCacheOverflowBytes)
        weights.push_back(weights[0].clone());
      for (int64_t m : kRows) {
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        std::vector<float> x_values(static_cast<size_t>(m * shape.k));
        for (float& v : x_values) v = uniform(random);
        const Tensor x = Tensor::from_floats(x_values, {m, shape.k});
        const double worst = check(weights[0], x, m);
        if (worst > 1) ++failures;
        double us = NAN;
        if (!skip_timing) {
          Tensor out = Tensor::empty({m, shape.n}, DType::f32);
          us = median_us([&](int call) {
            cpu::quantized_linear(x, weights[call % weights.size()], nullptr, out);
          });
        }
        const double gb_per_s = static_cast<double>(bytes) / (us * 1e3);
        fmt::print("{:>5} {:>12} {:>3} {:>10.1f} {:>8.1f} {:>5.0f}% {:>8}\n", dtype_name(dtype),
                   shape.name, m, us, gb_per_s, 100 * gb_per_s / ceiling,
                   worst > 1 ? fmt::format("FAIL {:.2f}", worst) : "ok");
      }
    }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::lab::cpu_lab_main("quantized_cpu_lab", argc, argv, tessera::run);
}
