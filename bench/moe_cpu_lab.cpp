// CPU mixture-of-experts lab: fused_moe's CPU kernel (kernels/cpu/fused_moe.cpp) at the expert
// shapes of Qwen3-30B-A3B (128 experts of 768, 8 per token, hidden 2048) and Mixtral 8x7B (8 of
// 14336, 2 per token, hidden 4096; a quarter of its intermediate size, to keep the lab's memory
// small), bf16 weights, 1, 8 and 64 tokens. First the kernel is checked against the float64
// reference (tests/support/reference.h) on a small shape of each dtype; then each case is timed
// (median of 15 samples of at least 20 ms) beside the op's decomposition (every expert on every
// token, what compiled mode would run if it decomposed fused_moe; up to 8 tokens). The rate counts
// the bytes of the experts the tokens chose, each once, against the read bandwidth this machine
// measures on the same threads (TESSERA_NUM_THREADS). Usage: moe_cpu_lab [--only TEXT]
// [--skip-timing]
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cpu_lab.h"
#include "compile/ir/op_registry.h"
#include "runtime/kernel_registry.h"
#include "support/reference.h"

namespace tessera {
namespace {

struct LabShape {
  const char* name;
  int64_t hidden, experts, intermediate, top_k;
};
constexpr LabShape kShapes[] = {{"qwen3-30b-a3b", 2048, 128, 768, 8},
                                {"mixtral-8x7b/4", 4096, 8, 3584, 2}};
constexpr int64_t kTokens[] = {1, 8, 64};

// Uniform values in [-scale, scale) rounded through `dtype`: one random block of 2^20 values,
// tiled (as good as fresh data for timing, and fast to make at a gigabyte).
Tensor random_tensor(const Shape& sizes, DType dtype, double scale, std::mt19937_64& random) {
  std::uniform_real_distribution<float> uniform(static_cast<float>(-scale),
                                                static_cast<float>(scale));
  std::vector<float> block(size_t{1} << 20);
  for (float& v : block) v = uniform(random);
  std::vector<float> values(static_cast<size_t>(shape_numel(sizes)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = block[i % block.size()];
  return Tensor::from_floats(values, sizes, dtype);
}

struct Problem {
  std::vector<Tensor> inputs;  // x, router_logits, gate_up_weights, down_weights
  Attributes attributes;
};

Problem make_problem(const LabShape& shape, int64_t tokens, DType dtype, std::mt19937_64& random) {
  const double weight_scale = 1.0 / std::sqrt(static_cast<double>(shape.hidden));
  return {{random_tensor({tokens, shape.hidden}, dtype, 1.0, random),
           random_tensor({tokens, shape.experts}, dtype, 2.0, random),
           random_tensor({shape.experts, 2 * shape.intermediate, shape.hidden}, dtype, weight_scale,
                         random),
           random_tensor({shape.experts, shape.hidden, shape.intermediate}, dtype, weight_scale,
                         random)},
          {{"top_k", shape.top_k}, {"renormalize", true}}};
}

Tensor run_kernel_once(const Problem& problem, Tensor& out) {
  run_kernel("fused_moe", DeviceType::cpu,
             KernelArgs{problem.inputs, problem.attributes, {&out, 1}});
  return out;
}

// The kernel's largest error against float64, over the bound the op conformance test allows (its
// dtype's rounding of the sum of magnitudes): at most 1 passes.
double check(const Problem& problem) {
  std::vector<test::RefTensor> inputs;
  for (const Tensor& input : problem.inputs) inputs.push_back({input.sizes(), input.to_doubles()});
  Tensor out = Tensor::empty(problem.inputs[0].sizes(), problem.inputs[0].dtype());
  const std::vector<double> got = run_kernel_once(problem, out).to_doubles();
  return test::fused_moe_error_over_bound(inputs, problem.attributes, got,
                                          problem.inputs[0].dtype() == DType::f32 ? 1e-5 : 1e-2);
}

// Bytes of the experts the tokens chose, each once (bf16 gate, up and down rows).
double chosen_expert_bytes(const Problem& problem, const LabShape& shape) {
  const std::vector<double> logits = problem.inputs[1].to_doubles();
  std::set<int64_t> chosen;
  const int64_t tokens = problem.inputs[1].size(0);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int64_t> order(static_cast<size_t>(shape.experts));
    for (int64_t e = 0; e < shape.experts; ++e) order[e] = e;
    std::partial_sort(order.begin(), order.begin() + shape.top_k, order.end(),
                      [&](int64_t a, int64_t b) {
                        return logits[t * shape.experts + a] > logits[t * shape.experts + b];
                      });
    chosen.insert(order.begin(), order.begin() + shape.top_k);
  }
  return static_cast<double>(chosen.size()) * 3.0 * static_cast<double>(shape.hidden) *
         static_cast<double>(shape.intermediate) *
         static_cast<double>(element_size(problem.inputs[2].dtype()));
}

int run(std::string_view only, bool skip_timing) {
  std::mt19937_64 random(20261129);
  int failures = 0;
  fmt::print("checks against float64 (worst error over the allowed bound; at most 1 passes):\n");
  for (DType dtype : {DType::f32, DType::bf16})
    for (int64_t tokens : kTokens) {
      const Problem problem = make_problem({"check", 256, 16, 96, 4}, tokens, dtype, random);
      const double worst = check(problem);
      if (!(worst <= 1)) ++failures;
      fmt::print("  {:>4} hidden 256, 16 experts of 96, 4 per token, {:>2} tokens: {:.2e} {}\n",
                 dtype_name(dtype), tokens, worst, worst <= 1 ? "ok" : "FAIL");
    }
  if (skip_timing) return failures == 0 ? 0 : 1;
  const double ceiling = lab::read_bandwidth();
  fmt::print("\nthreads {}, read bandwidth {:.1f} GB/s\n", cpu::num_threads(), ceiling);
  fmt::print("{:>16} {:>6} {:>11} {:>8} {:>6} {:>17} {:>8}\n", "shape (bf16)", "tokens", "fused us",
             "GB/s", "read%", "decomposition us", "ratio");
  const OpDef& op = OpRegistry::global().get("fused_moe");
  for (const LabShape& shape : kShapes) {
    if (!only.empty() && std::string_view(shape.name).find(only) == std::string_view::npos)
      continue;
    for (int64_t tokens : kTokens) {
      const Problem problem = make_problem(shape, tokens, DType::bf16, random);
      Tensor out = Tensor::empty(problem.inputs[0].sizes(), DType::bf16);
      const double fused = lab::median_us([&](int) { run_kernel_once(problem, out); });
      const double decomposed = tokens > 8 ? NAN : lab::median_us([&](int) {
        op.decompose(problem.inputs, problem.attributes);
      });
      const double gb_per_s = chosen_expert_bytes(problem, shape) / (fused * 1e3);
      fmt::print("{:>16} {:>6} {:>11.1f} {:>8.1f} {:>5.0f}% {:>17} {:>8}\n", shape.name, tokens,
                 fused, gb_per_s, 100 * gb_per_s / ceiling,
                 std::isnan(decomposed) ? "-" : fmt::format("{:.1f}", decomposed),
                 std::isnan(decomposed) ? "-" : fmt::format("{:.1f}x", decomposed / fused));
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::lab::cpu_lab_main("moe_cpu_lab", argc, argv, tessera::run);
}
