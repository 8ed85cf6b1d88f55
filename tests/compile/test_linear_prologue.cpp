// The linear-prologue pass (compile/passes/linear_prologue.cpp) and the op it makes,
// <activation>_and_mul_linear: which graphs it rewrites (the custom op and its decomposition, silu
// and gelu) and which it leaves alone; compiled == eager with it; on a GPU, the skinny kernels
// that compute the activation while reading x give the same bits as the two steps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "compile/compiled_function.h"
#include "compile/compiler.h"
#include "compile/ops/ops.h"
#include "compile/trace/dispatch.h"
#include "kernels/linear_path.h"
#include "runtime/backend/backend.h"
#include "runtime/kernel_registry.h"
#include "support/compile_options.h"
#include "support/error_of.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

size_t count_op(const Graph& graph, const std::string& name) {
  size_t count = 0;
  for (const Node& node : graph.nodes())
    if (node.kind == NodeKind::call && node.op->name == name) ++count;
  return count;
}

struct Compiled {
  std::shared_ptr<const CompiledPlan> plan;
  std::unique_ptr<CompiledFunction> function;
};

// Compiles `function` with custom ops `custom_ops` and the pass on or off.
Compiled compile(const std::function<std::vector<Tensor>(std::span<const Tensor>)>& function,
                 const std::vector<std::string>& custom_ops, bool prologue_fusion,
                 const std::string& cache_name) {
  Compiled compiled;
  CompilerOptions options = test_compiler_options(fresh_temp_dir(cache_name));
  options.config.pass_config.enable_linear_prologue_fusion = prologue_fusion;
  compiled.function = std::make_unique<CompiledFunction>(
      function, compiled_mode_options(options, {{0, 0}}, CustomOpConfig::parse(custom_ops, false),
                                      [&compiled](auto plan) { compiled.plan = plan; }));
  return compiled;
}

void expect_matches_eager(
    CompiledFunction& compiled,
    const std::function<std::vector<Tensor>(std::span<const Tensor>)>& function, int64_t width) {
  for (int64_t rows : {1, 5, 64}) {
    std::vector<Tensor> inputs{random_tensor({rows, width}, static_cast<uint32_t>(rows + 11))};
    std::vector<Tensor> got = compiled(inputs), want = function(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o)
      EXPECT_LT(relative_error(got[o], want[o]), 1e-5) << rows << " rows, output " << o;
  }
}

class LinearPrologue : public ::testing::Test {
 protected:
  Tensor gate_up = random_tensor({64, 24}, 1);
  Tensor down = random_tensor({24, 32}, 2);
  Tensor bias = random_tensor({24}, 3);
};

TEST_F(LinearPrologue, GatedActivationIntoTheDownProjectionInBothForms) {
  auto silu_mlp = [&](std::span<const Tensor> in) {
    Tensor h = ops::add(in[0], in[0]);  // a fused kernel before the MLP
    return std::vector<Tensor>{ops::linear(ops::silu_and_mul(ops::linear(h, gate_up)), down)};
  };
  // The custom op disabled (its decomposition: slices, silu, mul) and enabled (one node).
  for (const std::vector<std::string>& custom_ops :
       {std::vector<std::string>{"none"}, std::vector<std::string>{"none", "+silu_and_mul"}}) {
    Compiled compiled = compile(silu_mlp, custom_ops, true, "prologue_silu");
    expect_matches_eager(*compiled.function, silu_mlp, 24);
    ASSERT_NE(compiled.plan, nullptr);
    const Graph& graph = compiled.plan->graph;
    EXPECT_EQ(count_op(graph, "silu_and_mul_linear"), 1u) << graph.str();
    EXPECT_EQ(count_op(graph, "linear"), 1u) << graph.str();  // the gate/up projection
    for (const char* absorbed : {"silu", "mul", "slice", "silu_and_mul"})
      EXPECT_EQ(count_op(graph, absorbed), 0u) << absorbed << "\n" << graph.str();
    EXPECT_THAT(compiled.plan->explain(), HasSubstr("silu_and_mul_linear"));
  }
}

TEST_F(LinearPrologue, GeluTanhKeepsItsApproximationAndTheBias) {
  auto gelu_mlp = [&](std::span<const Tensor> in) {
    Tensor gated = ops::gelu_and_mul(ops::linear(in[0], gate_up), "tanh");
    return std::vector<Tensor>{ops::linear(gated, down, bias)};
  };
  for (const std::vector<std::string>& custom_ops :
       {std::vector<std::string>{"none"}, std::vector<std::string>{"all"}}) {
    Compiled compiled = compile(gelu_mlp, custom_ops, true, "prologue_gelu");
    expect_matches_eager(*compiled.function, gelu_mlp, 24);
    ASSERT_NE(compiled.plan, nullptr);
    const Graph& graph = compiled.plan->graph;
    ASSERT_EQ(count_op(graph, "gelu_and_mul_linear"), 1u) << graph.str();
    for (const Node& node : graph.nodes()) {
      if (node.kind != NodeKind::call || node.op->name != "gelu_and_mul_linear") continue;
      EXPECT_EQ(node.attributes.get_string("approximate"), "tanh");
      EXPECT_EQ(node.inputs.size(), 3u);  // x, weight, bias
    }
  }
}

TEST_F(LinearPrologue, LeavesAloneWhatItMustNotFuse) {
  // The activation read by something else too (returned), a mul of two unrelated slices, the
  // pass turned off: no fused op, same results.
  auto activation_returned = [&](std::span<const Tensor> in) {
    Tensor activated = ops::silu_and_mul(ops::linear(in[0], gate_up));
    return std::vector<Tensor>{ops::linear(activated, down), activated};
  };
  auto other_halves = [&](std::span<const Tensor> in) {
    Tensor x = ops::linear(in[0], gate_up);
    // Overlapping halves: only the half check can turn these down (CSE merges equal slices).
    Tensor product = ops::mul(ops::silu(ops::slice(x, -1, 0, 32)), ops::slice(x, -1, 16, 48));
    return std::vector<Tensor>{ops::linear(product, down)};
  };
  auto plain = [&](std::span<const Tensor> in) {
    return std::vector<Tensor>{ops::linear(ops::silu_and_mul(ops::linear(in[0], gate_up)), down)};
  };
  struct Case {
    const char* name;
    std::function<std::vector<Tensor>(std::span<const Tensor>)> function;
    bool pass_on;
  };
  for (const Case& c : {Case{"activation_returned", activation_returned, true},
                        Case{"other_halves", other_halves, true}, Case{"pass_off", plain, false}}) {
    for (const std::vector<std::string>& custom_ops :
         {std::vector<std::string>{"none"}, std::vector<std::string>{"all"}}) {
      Compiled compiled = compile(c.function, custom_ops, c.pass_on, c.name);
      expect_matches_eager(*compiled.function, c.function, 24);
      ASSERT_NE(compiled.plan, nullptr);
      EXPECT_EQ(count_op(compiled.plan->graph, "silu_and_mul_linear"), 0u)
          << c.name << "\n"
          << compiled.plan->graph.str();
      EXPECT_THAT(compiled.plan->explain(), Not(HasSubstr("_and_mul_linear"))) << c.name;
    }
  }
}

TEST(LinearPrologueOp, RefusesMismatchedShapesNamingThem) {
  Tensor x = random_tensor({3, 14}, 5);
  const OpDef& op = OpRegistry::global().get("silu_and_mul_linear");
  std::vector<Tensor> wrong_k{x, random_tensor({5, 6}, 6)};
  EXPECT_THAT(error_of([&] { call_op(op, wrong_k, {}); }),
              AllOf(HasSubstr("silu_and_mul_linear"), HasSubstr("'weight'"), HasSubstr("7")));
  std::vector<Tensor> odd{random_tensor({3, 13}, 7), random_tensor({5, 6}, 8)};
  EXPECT_THAT(error_of([&] { call_op(op, odd, {}); }),
              AllOf(HasSubstr("'x'"), HasSubstr("even last size")));
}

// ---- GPU: the skinny kernels with the activation against the two steps on the same variant
// (the activation kernel, then linear forced to that variant), bit for bit: the kernels round
// the activation as the activation kernel does and accumulate in the same order.

TEST(GpuLinearPrologue, SkinnyKernelsWithTheActivationEqualTheTwoSteps) {
  Device gpu;
  if (!first_gpu(&gpu))
    GTEST_SKIP() << "no GPU device available (needs a CUDA or HIP build and a device)";
  const int64_t k = 1024;
  size_t cases = 0;
  // 8456 weight rows: the mma kernels' blocks take several row tiles, and only the first tile's
  // warps store the activation.
  for (const auto& [dtype, n] :
       {std::pair{DType::bf16, int64_t{72}}, std::pair{DType::f32, int64_t{72}},
        std::pair{DType::bf16, int64_t{8456}}}) {
    for (int64_t rows : {1, 3, 8, 16, 40}) {
      for (const char* name : {"silu_and_mul", "gelu_and_mul"}) {
        const OpDef& fused = OpRegistry::global().get(std::string(name) + "_linear");
        const Attributes attributes = std::string(name) == "gelu_and_mul"
                                          ? Attributes{{"approximate", std::string("tanh")}}
                                          : Attributes{};
        Tensor x = random_tensor({rows, 2 * k}, 21, dtype, gpu);
        Tensor weight = random_tensor({n, k}, 22, dtype, gpu);
        for (const std::string& variant : linear_variants(gpu.type)) {
          ForceLinearPath forced(variant);
          std::vector<Tensor> x_only{x};
          Tensor activated = call_op(name, x_only, attributes)[0];
          std::vector<Tensor> linear_inputs{activated, weight};
          Tensor want = call_op("linear", linear_inputs, {})[0];
          // Outputs filled with NaN first, so that an element the kernel leaves unwritten shows.
          std::vector<Tensor> fused_inputs{x, weight};
          std::vector<Tensor> got{
              Tensor::from_floats(std::vector<float>(static_cast<size_t>(rows * n), std::nanf("")),
                                  {rows, n}, dtype, gpu),
              Tensor::from_floats(std::vector<float>(static_cast<size_t>(rows * k), std::nanf("")),
                                  {rows, k}, dtype, gpu)};
          run_kernel(fused.name, gpu.type, KernelArgs{fused_inputs, attributes, got});
          EXPECT_EQ(max_abs_difference(got[0].to(kCPU), want.to(kCPU)), 0.0)
              << name << " " << dtype_name(dtype) << " rows " << rows << " " << variant;
          EXPECT_EQ(max_abs_difference(got[1].to(kCPU), activated.to(kCPU)), 0.0)
              << name << " activation " << dtype_name(dtype) << " rows " << rows << " " << variant;
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 0u);
}

}  // namespace
