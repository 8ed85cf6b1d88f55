// Quantized GEMM lab: linear with a quantized weight (kernels/cuda/gemm/quantized_linear.h) at the
// shapes of Llama-3.2-1B (qkv 3072x2048, o 2048x2048, gate_up 16384x2048, down 2048x8192) and
// Llama-3.1-8B (8b_*) for Q8_0, Q4_K and Q6_K, x in bf16, M in {1, 8, 32, 64, 256}. Each path (the
// gemv, the dequantized tiles, and the measured choice) is first checked against the float64
// product of the weight the CPU dequantizes (kernels/quant, which matches llama.cpp bit for bit)
// with x as the GPU read it (quantized to 8 bits per block where the gemv's integer dot products
// quantize it; check_path states each path's bound), then timed over copies of the weight that
// overflow L2; the rate is the quantized bytes read per second, against the device's copy
// bandwidth. Kernels launch programmatically, as the model runner launches them by default.
#include <fmt/format.h>

#include <cmath>

#include "bench/lab_harness.h"
#include "kernels/cuda/gemm/quantized_linear.h"
#include "kernels/quant/activation_blocks.h"
#include "kernels/quant/block_format.h"
#include "runtime/backend/programmatic_launch.h"
#include "support/quantized_blocks.h"

namespace tessera::lab {
namespace {

struct Shape2 {
  const char* name;
  int64_t n, k;
};
constexpr Shape2 kShapes[] = {{"qkv", 3072, 2048},         {"o", 2048, 2048},
                              {"gate_up", 16384, 2048},    {"down", 2048, 8192},
                              {"8b_qkv", 6144, 4096},      {"8b_o", 4096, 4096},
                              {"8b_gate_up", 28672, 4096}, {"8b_down", 4096, 14336}};
constexpr DType kFormats[] = {DType::q8_0, DType::q4_k, DType::q6_k};  // timed
// Checked (every path against float64): the timed formats and those whose f16 fields
// random_weight knows.
constexpr DType kCheckedFormats[] = {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                                     DType::q8_0, DType::q4_k, DType::q5_k, DType::q6_k};
constexpr int64_t kRows[] = {1, 8, 32, 64, 256};

// A host weight of random blocks whose f16 scale fields hold small ordinary values.
Tensor random_weight(DType dtype, int64_t n, int64_t k, std::mt19937_64& random) {
  return testing::random_quantized(dtype, {n, k}, static_cast<uint32_t>(random()));
}

using PathFn = void (*)(const Tensor&, const Tensor&, const Tensor*, const Tensor&);
struct Path {
  const char* name;
  PathFn run;
  int64_t max_rows;
};
const Path kPaths[] = {{"gemv", gpu::quantized_linear_gemv, gpu::kQuantizedGemvMaxRows},
                       {"mma", gpu::quantized_linear_mma, gpu::kQuantizedGemvMaxRows},
                       {"tiles", gpu::quantized_linear_tiles, 1 << 30},
                       {"measured", gpu::quantized_linear, 1 << 30}};
constexpr int kPathCount = 4;

// Whether `path` runs `weight` at m rows of x.
bool path_runs(const Path& path, const Tensor& weight, int64_t m) {
  return m <= path.max_rows &&
         (path.run != gpu::quantized_linear_mma || gpu::quantized_mma_fits(weight));
}

// The worst |got - want| over the allowed error of `path`, want the float64 product of the
// weight the CPU dequantizes with:
//   x quantized to 8 bits per block as the CPU quantizes it, where the gemv does so: then only the
//     f32 sums (1e-5 of the sum of magnitudes) and the output's rounding to x's dtype are allowed;
//   x as it is otherwise; the tiles also round each weight to x's dtype (bf16: at most 2^-9 of it,
//     so 2^-9 of the sum of magnitudes).
// The measured choice is held to the bound of the path it took, i.e. the lesser of the two.
double check_path(const Path& path, const Tensor& weight_host, const Tensor& weight,
                  const Tensor& x, int64_t m) {
  const int64_t n = weight.size(0), k = weight.size(1);
  const DType dtype = weight.dtype();
  std::vector<float> dequantized(static_cast<size_t>(n * k));
  quant::dequantize_blocks(dtype, static_cast<const std::byte*>(weight_host.data_ptr()),
                           dequantized.data(), n * k / block_elements(dtype));
  const std::vector<float> x_values = x.to_floats();
  // x as the integer dot products see it: scale times quant.
  std::vector<float> x_quantized(x_values.size());
  {
    std::vector<int8_t> quants(x_values.size());
    std::vector<float> scales(x_values.size() / 32);
    std::vector<int16_t> sums(x_values.size() / 16);
    for (int64_t r = 0; r < m; ++r)
      quant::quantize_activation(x_values.data() + r * k, k, block_elements(dtype),
                                 quants.data() + r * k, scales.data() + r * k / 32,
                                 sums.data() + r * k / 16);
    for (size_t i = 0; i < x_values.size(); ++i)
      x_quantized[i] = scales[i / 32] * static_cast<float>(quants[i]);
  }
  const bool gemv_quantizes = gpu::quantized_gemv_quantizes_activations(weight);
  Tensor out = Tensor::empty({m, n}, x.dtype(), x.device());
  path.run(x, weight, nullptr, out);
  const std::vector<float> got = out.to_floats();
  const double tile_rounding = std::ldexp(1.0, -9);
  double worst = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double plain = 0, quantized = 0, magnitude = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double w = dequantized[j * k + i];
        plain += double{x_values[r * k + i]} * w;
        quantized += double{x_quantized[r * k + i]} * w;
        magnitude += std::fabs(double{x_values[r * k + i]} * w);
      }
      const auto error = [&](double want, double extra) {
        const double allowed =
            relative_tolerance(x.dtype()) * std::fabs(want) + (1e-5 + extra) * magnitude;
        return std::fabs(got[r * n + j] - want) / allowed;
      };
      const double gemv_error = gemv_quantizes ? error(quantized, 0) : error(plain, 0);
      const double tiles_error = error(plain, tile_rounding);
      const double path_error =
          path.run == gpu::quantized_linear_gemv || path.run == gpu::quantized_linear_mma
              ? gemv_error
          : path.run == gpu::quantized_linear_tiles ? tiles_error
                                                    : std::min(gemv_error, tiles_error);
      worst = std::max(worst, path_error);
    }
  return worst;
}

int run(const LabArgs& args) {
  const ProgrammaticLaunchScope programmatic(true);
  LabTimer timer(args.device, args.samples());
  LabRandom random(args.device);
  const Ceilings ceilings = measure_ceilings(timer, random, false);
  fmt::print("copy bandwidth {:.0f} GB/s\n", ceilings.copy_gb_per_s);
  int failures = 0;
  // Checks on a narrow slice of each shape (N = 88), every path and M.
  for (DType dtype : kCheckedFormats)
    for (const Shape2& shape : kShapes) {
      if (args.skip_checks || !args.selects(fmt::format("{} {}", dtype_name(dtype), shape.name)))
        continue;
      const Tensor host = random_weight(dtype, 88, shape.k, random.generator());
      const Tensor weight = host.to(args.device);
      for (int64_t m : kRows) {
        const Tensor x = random.uniform({m, shape.k}, DType::bf16);
        for (const Path& path : kPaths) {
          if (!path_runs(path, weight, m)) continue;
          const double worst = check_path(path, host, weight, x, m);
          if (worst > 1) {
            ++failures;
            fmt::print("FAIL {} {} {} M={}: worst error {:.2f} of the allowed\n", path.name,
                       dtype_name(dtype), shape.name, m, worst);
          }
        }
      }
    }
  if (args.skip_timing) return failures == 0 ? 0 : 1;
  fmt::print("{:>5} {:>10} {:>5} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6}\n", "fmt", "shape", "M",
             "gemv us", "mma us", "tiles us", "measured", "GB/s", "copy%");
  for (DType dtype : kFormats)
    for (const Shape2& shape : kShapes) {
      if (!args.selects(fmt::format("{} {}", dtype_name(dtype), shape.name))) continue;
      // Enough copies of the weight to overflow L2: each call reads its weight from memory.
      std::vector<Tensor> weights;
      const Tensor host = random_weight(dtype, shape.n, shape.k, random.generator());
      const size_t copies = std::max<size_t>(2, (size_t{256} << 20) / host.nbytes() + 1);
      for (size_t c = 0; c < copies; ++c) weights.push_back(host.to(args.device));
      for (int64_t m : kRows) {
        const Tensor x = random.uniform({m, shape.k}, DType::bf16);
        const Tensor out = Tensor::empty({m, shape.n}, DType::bf16, args.device);
        double us[kPathCount] = {NAN, NAN, NAN, NAN};
        for (int p = 0; p < kPathCount; ++p) {
          if (!path_runs(kPaths[p], weights[0], m)) continue;
          us[p] = timer.median_graph_us(
              [&](int call) { kPaths[p].run(x, weights[call % copies], nullptr, out); }, 20);
        }
        const double bytes = static_cast<double>(host.nbytes());
        const Achieved rates = achieved(ceilings, bytes, 0, us[3]);
        fmt::print("{:>5} {:>10} {:>5} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>7.0f} {:>5.0f}%\n",
                   dtype_name(dtype), shape.name, m, us[0], us[1], us[2], us[3], rates.gb_per_s,
                   rates.copy_percent);
      }
    }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  return tessera::lab::lab_main("quantized_gemm_lab",
                                "linear with Q8_0/Q4_K/Q6_K weights: gemv, tiles, measured", argc,
                                argv, tessera::lab::run, /*names_cases=*/true);
}
