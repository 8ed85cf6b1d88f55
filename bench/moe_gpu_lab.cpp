// GPU mixture-of-experts lab: fused_moe's GPU kernels (kernels/cuda/experts/fused_moe.h), the
// skinny, the tiled (f32 FMAs) and the tensor-core grouped GEMMs and the automatic choice, first
// checked against float64 (tests/support/reference.h) on small shapes of each dtype, then timed
// (CUDA graphs of 20 calls, so that host launches stay out) at the expert shapes of Qwen3-30B-A3B
// (128 experts of 768, 8 per token, hidden 2048) and Mixtral 8x7B (8 experts of 14336, 2 per token,
// hidden 4096), bf16, from 1 to 2048 tokens, beside the op's decomposition (every expert on every
// token, up to 64 tokens), and Qwen3-30B-A3B's experts in llama.cpp's Q4_K_M formats (gate and up
// Q4_K, down Q6_K). Rates: GB/s of the experts the tokens chose, each read once as stored, against
// the copy bandwidth; TFLOP/s of the chosen experts' products against the bf16 GEMM.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "bench/lab_harness.h"
#include "compile/ir/op_registry.h"
#include "kernels/cuda/experts/fused_moe.h"
#include "support/quantized_blocks.h"
#include "support/reference.h"

namespace tessera::lab {
namespace {

using gpu::MoeKernel;

struct MoeShape {
  const char* name;
  int64_t hidden, experts, intermediate, top_k;
};
constexpr MoeShape kShapes[] = {{"qwen3-30b-a3b", 2048, 128, 768, 8},
                                {"mixtral-8x7b", 4096, 8, 14336, 2}};
constexpr int64_t kTokens[] = {1, 8, 64, 512, 2048};
// Timed: each shape in bf16, and Qwen3-30B-A3B's experts in llama.cpp's Q4_K_M formats.
constexpr std::pair<MoeShape, bool> kTimedShapes[] = {
    {kShapes[0], false}, {kShapes[1], false}, {kShapes[0], true}};
constexpr int64_t kMostDecomposedTokens = 64;

struct Problem {
  Tensor x, logits, gate_up, down;
  int64_t top_k;
};

Problem make_problem(LabRandom& random, int64_t tokens, int64_t hidden, int64_t experts,
                     int64_t intermediate, int64_t top_k, DType dtype) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(hidden));
  return {random.uniform({tokens, hidden}, dtype),
          random.uniform({tokens, experts}, dtype, -2.0, 2.0),
          random.uniform({experts, 2 * intermediate, hidden}, dtype, -scale, scale),
          random.uniform({experts, hidden, intermediate}, dtype, -scale, scale), top_k};
}

// The experts in llama.cpp's Q4_K_M formats (gate and up Q4_K, down Q6_K), x bf16.
Problem quantized_problem(LabRandom& random, int64_t tokens, int64_t hidden, int64_t experts,
                          int64_t intermediate, int64_t top_k) {
  const auto seed = static_cast<uint32_t>(random.generator()());
  return {random.uniform({tokens, hidden}, DType::bf16),
          random.uniform({tokens, experts}, DType::bf16, -2.0, 2.0),
          testing::random_quantized(DType::q4_k, {experts, 2 * intermediate, hidden}, seed)
              .to(random.device()),
          testing::random_quantized(DType::q6_k, {experts, hidden, intermediate}, seed + 1)
              .to(random.device()),
          top_k};
}

const char* kernel_name(MoeKernel kernel) {
  switch (kernel) {
    case MoeKernel::skinny:
      return "skinny";
    case MoeKernel::tiled:
      return "tiled";
    case MoeKernel::tensor_cores:
      return "mma";
    case MoeKernel::automatic:
      break;
  }
  return "auto";
}

void run(const Problem& problem, MoeKernel kernel, const Tensor& out) {
  gpu::run_fused_moe(problem.x, problem.logits, problem.gate_up, problem.down, out, problem.top_k,
                     true, 0, kernel);
}

int check_cases(LabRandom& random) {
  int failures = 0;
  fmt::print("checks against float64 (worst error over the allowed bound; at most 1 passes):\n");
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (int64_t tokens : {1, 8, 100})
      for (MoeKernel kernel : {MoeKernel::skinny, MoeKernel::tiled, MoeKernel::tensor_cores}) {
        if (kernel == MoeKernel::tensor_cores && dtype == DType::f32) continue;
        const Problem problem = make_problem(random, tokens, 256, 16, 96, 4, dtype);
        Tensor out = Tensor::empty({tokens, 256}, dtype, random.device());
        run(problem, kernel, out);
        std::vector<test::RefTensor> inputs;
        for (const Tensor* input : {&problem.x, &problem.logits, &problem.gate_up, &problem.down})
          inputs.push_back({input->sizes(), input->to(kCPU).to_doubles()});
        const double worst = test::fused_moe_error_over_bound(
            inputs, {{"top_k", problem.top_k}, {"renormalize", true}}, out.to(kCPU).to_doubles(),
            dtype == DType::f32 ? 1e-5 : 1e-2);
        if (!(worst <= 1)) ++failures;
        fmt::print(
            "  {:>4} {:>6} hidden 256, 16 experts of 96, 4 per token, {:>3} tokens: {:.2e} {}\n",
            dtype_name(dtype), kernel_name(kernel), tokens, worst, worst <= 1 ? "ok" : "FAIL");
      }
  // Experts as llama.cpp's Q4_K_M stores them (gate and up Q4_K, down Q6_K), x bf16, against
  // float64 of the dequantized experts.
  for (int64_t tokens : {1, 8, 100})
    for (MoeKernel kernel : {MoeKernel::skinny, MoeKernel::tiled, MoeKernel::tensor_cores}) {
      const Problem problem = quantized_problem(random, tokens, 256, 16, 256, 4);
      Tensor out = Tensor::empty({tokens, 256}, DType::bf16, random.device());
      run(problem, kernel, out);
      std::vector<test::RefTensor> inputs;
      for (const Tensor& input :
           {problem.x.to(kCPU), problem.logits.to(kCPU), testing::dequantized(problem.gate_up),
            testing::dequantized(problem.down)})
        inputs.push_back({input.sizes(), input.to_doubles()});
      const double worst = test::fused_moe_error_over_bound(
          inputs, {{"top_k", problem.top_k}, {"renormalize", true}}, out.to(kCPU).to_doubles(),
          1e-2);
      if (!(worst <= 1)) ++failures;
      fmt::print(
          "  q4_k/q6_k experts, bf16 x {:>6} hidden 256, 16 experts of 256, 4 per token, {:>3} "
          "tokens: {:.2e} {}\n",
          kernel_name(kernel), tokens, worst, worst <= 1 ? "ok" : "FAIL");
    }
  return failures;
}

// The bytes of one expert's gate, up and down weights as stored.
int64_t expert_bytes(const Problem& problem) {
  return static_cast<int64_t>(problem.gate_up.nbytes() + problem.down.nbytes()) /
         problem.gate_up.size(0);
}

// How many distinct experts the tokens chose (the top_k largest logits of each token).
int64_t chosen_experts(const Problem& problem) {
  const std::vector<float> logits = problem.logits.to(kCPU).to_floats();
  const int64_t tokens = problem.logits.size(0), experts = problem.logits.size(1);
  std::set<int64_t> chosen;
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) order[e] = e;
    std::partial_sort(
        order.begin(), order.begin() + problem.top_k, order.end(),
        [&](int64_t a, int64_t b) { return logits[t * experts + a] > logits[t * experts + b]; });
    chosen.insert(order.begin(), order.begin() + problem.top_k);
  }
  return static_cast<int64_t>(chosen.size());
}

void time_cases(const LabArgs& args, LabRandom& random) {
  LabTimer timer(args.device, args.samples());
  const Ceilings ceilings = measure_ceilings(timer, random, true);
  fmt::print("\ncopy bandwidth {:.0f} GB/s, bf16 GEMM {:.0f} TFLOP/s\n", ceilings.copy_gb_per_s,
             ceilings.gemm_tflops);
  fmt::print(
      "{:22} {:>5} {:>7} | {:>9} {:>9} {:>9} {:>9} | {:>7} {:>6} {:>8} {:>6} | {:>11} {:>6}\n",
      "shape (x bf16)", "tokens", "experts", "skinny us", "tiled us", "mma us", "auto us", "GB/s",
      "copy%", "TFLOP/s", "gemm%", "decomposed", "ratio");
  const OpDef& op = OpRegistry::global().get("fused_moe");
  for (const auto& [shape, quantized] : kTimedShapes) {
    // The weights once per shape, the tokens' inputs per case.
    const Problem weights = quantized ? quantized_problem(random, 1, shape.hidden, shape.experts,
                                                          shape.intermediate, shape.top_k)
                                      : make_problem(random, 1, shape.hidden, shape.experts,
                                                     shape.intermediate, shape.top_k, DType::bf16);
    const std::string shape_name =
        quantized ? fmt::format("{}-q4_k_m", shape.name) : std::string(shape.name);
    for (int64_t tokens : kTokens) {
      const std::string name = fmt::format("{} t{}", shape_name, tokens);
      if (!args.selects(name)) continue;
      const Problem problem{random.uniform({tokens, shape.hidden}, DType::bf16),
                            random.uniform({tokens, shape.experts}, DType::bf16, -2.0, 2.0),
                            weights.gate_up, weights.down, shape.top_k};
      Tensor out = Tensor::empty({tokens, shape.hidden}, DType::bf16, args.device);
      const auto time = [&](MoeKernel kernel) {
        return timer.median_graph_us([&](int) { run(problem, kernel, out); }, 20);
      };
      const double skinny_us = time(MoeKernel::skinny), tiled_us = time(MoeKernel::tiled);
      const double mma_us = time(MoeKernel::tensor_cores);
      const double automatic_us = time(MoeKernel::automatic);
      double decomposed_us = NAN;
      if (tokens <= kMostDecomposedTokens && !quantized) {
        const std::vector<Tensor> inputs = {problem.x, problem.logits, problem.gate_up,
                                            problem.down};
        const Attributes attributes{{"top_k", shape.top_k}, {"renormalize", true}};
        decomposed_us = timer.median_us([&](int) { op.decompose(inputs, attributes); });
      }
      const int64_t experts = chosen_experts(problem);
      const double bytes =
          static_cast<double>(experts) * static_cast<double>(expert_bytes(problem));
      const double flops =
          2.0 * 3.0 * static_cast<double>(tokens * shape.top_k * shape.hidden * shape.intermediate);
      const Achieved rate = achieved(ceilings, bytes, flops, automatic_us);
      fmt::print(
          "{:22} {:>5} {:>7} | {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} | {:>7.0f} {:>5.1f}% {:>8.1f} "
          "{:>5.1f}% | {:>11} {:>6}\n",
          shape_name, tokens, experts, skinny_us, tiled_us, mma_us, automatic_us, rate.gb_per_s,
          rate.copy_percent, rate.tflops, rate.gemm_percent,
          std::isnan(decomposed_us) ? "-" : fmt::format("{:.1f}", decomposed_us),
          std::isnan(decomposed_us) ? "-" : fmt::format("{:.1f}x", decomposed_us / automatic_us));
    }
  }
}

}  // namespace
}  // namespace tessera::lab

int main(int argc, char** argv) {
  using namespace tessera::lab;
  return lab_main(
      "moe_gpu_lab",
      "fused_moe's GPU kernels against float64, then timed at Qwen3-30B-A3B and Mixtral shapes",
      argc, argv,
      [](const LabArgs& args) {
        LabRandom random(args.device);
        const int failures = args.skip_checks ? 0 : check_cases(random);
        if (!args.skip_timing) time_cases(args, random);
        return failures == 0 ? 0 : 1;
      },
      /*names_cases=*/true);
}
