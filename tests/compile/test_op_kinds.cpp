// The registry seam: passes and code generators learn what an op is from its OpDef (kind,
// is_identity, row_lowering; compile/ir/op_registry.h) and, for pointwise ops, from the formula
// table (kernels/pointwise_table.h), never from lists of op names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "compile/codegen/cpp_codegen.h"
#include "compile/codegen/row_kernel.h"
#include "compile/ops/ops.h"
#include "compile/passes/pass_manager.h"
#include "compile/trace/tracer.h"
#include "kernels/pointwise_table.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;

namespace {

// `function` traced on [rows, ...] inputs with dim 0 dynamic, through cleanup and split; fused
// when `fused`.
CompiledPlan plan_of(const TensorFunction& function, std::vector<Tensor> inputs, bool fused) {
  TraceOptions options;
  for (size_t i = 0; i < inputs.size(); ++i) options.dynamic_dims.push_back({i, 0});
  CompiledPlan plan;
  plan.graph = trace(function, inputs, options).graph;
  CompilationConfig config;
  config.pass_config.enable_fusion = fused;
  PassManager({.config = config, .device = kCPU}, {"cleanup", "split", "fuse"}).run(plan);
  return plan;
}

const std::string& op_of(const CompiledPlan& plan, int node) {
  return plan.graph.nodes()[node].op->name;
}

}  // namespace

TEST(OpKinds, EveryOpKeepsThePromisesOfItsKind) {
  for (const OpDef* op : OpRegistry::global().all()) {
    SCOPED_TRACE(op->name);
    // Dispatch runs `eager` instead of a kernel: views, and only views, have one.
    EXPECT_EQ(op->kind == OpKind::view, static_cast<bool>(op->eager)) << op_kind_name(op->kind);
    if (op->kind != OpKind::view) {
      EXPECT_NE(find_kernel(op->name, DeviceType::cpu), nullptr);
    }
    switch (op->kind) {
      case OpKind::pointwise:
        EXPECT_TRUE(op->strided_inputs);
        EXPECT_TRUE(op->row_lowering.accepts && op->row_lowering.emit);
        break;
      case OpKind::view:  // folded into a fused kernel's index arithmetic
        EXPECT_TRUE(op->row_lowering.accepts && op->row_lowering.emit);
        break;
      case OpKind::library:
      case OpKind::splitting:  // their own kernels, never inside a generated one
        EXPECT_FALSE(op->row_lowering.accepts || op->row_lowering.emit);
        break;
      case OpKind::reduction:
      case OpKind::gather:
        break;
    }
  }
  EXPECT_EQ(OpRegistry::global().get("attention").kind, OpKind::splitting);
}

TEST(OpKinds, EveryTableFormulaIsAPointwiseOpWithKernels) {
  ASSERT_FALSE(pointwise_formulas().empty());
  for (const PointwiseFormula& formula : pointwise_formulas()) {
    SCOPED_TRACE(formula.name);
    const OpDef* op = OpRegistry::global().find(formula.name);
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(op->kind, OpKind::pointwise);
    EXPECT_EQ(op->input_names, formula.input_names);
    ASSERT_EQ(op->attributes.size(), formula.parameters.size());
    EXPECT_NE(find_kernel(formula.name, DeviceType::cpu), nullptr);
#ifdef TESSERA_CUDA
    EXPECT_NE(find_kernel(formula.name, DeviceType::cuda), nullptr);
#endif
  }
}

// Regression: a view op that a pass did not know by name became a copying library step.
TEST(OpKinds, ViewsStayViewsAndFoldIntoFusedKernels) {
  auto function = [](std::span<const Tensor> in) {
    Tensor t = ops::transpose(ops::reshape(in[0], {-1, 4, 8}), 1, 2);
    Tensor s = ops::slice(ops::exp(t), -1, 0, 4, 2);
    return std::vector<Tensor>{ops::contiguous(ops::reshape(s, {-1, 16}))};
  };
  std::vector<Tensor> inputs{random_tensor({6, 32}, 1)};
  CompiledPlan split = plan_of(function, inputs, false);
  for (const Step& step : split.steps) {
    const OpDef& op = *split.graph.nodes()[step.node].op;
    EXPECT_EQ(step.kind == StepKind::view, op.kind == OpKind::view) << op.name;
  }
  CompiledPlan fused = plan_of(function, inputs, true);
  ASSERT_EQ(fused.steps.size(), 1u) << fused.explain();
  ASSERT_EQ(fused.steps[0].kind, StepKind::fused);
  std::vector<std::string> ops;
  for (int node : fused.kernels.at(0).nodes) ops.push_back(op_of(fused, node));
  for (const char* expected : {"reshape", "transpose", "exp", "slice"})
    EXPECT_NE(std::find(ops.begin(), ops.end(), expected), ops.end()) << expected;
}

TEST(OpKinds, AnOpWithoutARowLoweringRunsAsItsOwnStep) {
  ASSERT_FALSE(OpRegistry::global().get("argmax").row_lowering.emit);
  auto function = [](std::span<const Tensor> in) {
    return std::vector<Tensor>{ops::argmax(ops::softmax(in[0]))};
  };
  CompiledPlan plan = plan_of(function, {random_tensor({5, 16}, 2)}, true);
  ASSERT_EQ(plan.steps.size(), 2u) << plan.explain();
  EXPECT_EQ(plan.steps[0].kind, StepKind::fused);
  EXPECT_EQ(plan.steps[1].kind, StepKind::library);
  EXPECT_EQ(op_of(plan, plan.steps[1].node), "argmax");
}

// softcap is defined only by its table entry and formula: the generated kernel calls that
// formula, whose source the prelude carries.
TEST(OpKinds, ATableOpLowersToItsFormulaInGeneratedCode) {
  auto function = [](std::span<const Tensor> in) {
    return std::vector<Tensor>{ops::softcap(ops::add_scalar(in[0], 1.0), 30.0)};
  };
  CompiledPlan plan = plan_of(function, {random_tensor({3, 8}, 3)}, true);
  ASSERT_EQ(plan.kernels.size(), 1u) << plan.explain();
  std::string source =
      generate_cpp_kernel(build_row_kernel_body(plan.graph, plan.kernels[0]), "softcap");
  EXPECT_THAT(source, HasSubstr("tsr_softcap(tsr_add_scalar("));
  EXPECT_THAT(source, HasSubstr(", 30.0f)"));
  EXPECT_THAT(source, HasSubstr("return cap * tanhf(x / cap);"));
}

TEST(OpKinds, AChoiceParameterOutsideItsChoicesIsRefused) {
  Tensor x = random_tensor({2, 3}, 4);
  try {
    ops::gelu(x, "fast");
    FAIL() << "gelu accepted approximate='fast'";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(),
                HasSubstr("gelu: approximate='fast' is not valid; use 'none' or 'tanh'"));
  }
}
