// A compiled function's custom-op rule is its own: two functions with different custom_ops, run
// eagerly and interleaved (and nested) in one thread, each dispatch the custom op as their rule
// says, and the rule is gone after each call, thrown out of or not.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "compile/compiled_function.h"
#include "compile/ops/ops.h"
#include "compile/trace/dispatch.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Records every op that reaches dispatch and runs it eagerly; a decomposed custom op shows up as
// itself followed by the primitives of its decomposition, an enabled one as itself alone.
class RecordingHandler : public DispatchHandler {
 public:
  std::vector<Tensor> handle(const OpDef& op, std::span<const Tensor> inputs,
                             const Attributes& attributes) override {
    names.push_back(op.name);
    return run_eager(op, inputs, attributes);
  }
  std::vector<std::string> names;
};

// rms_norm of the first input; `inner`, when set, runs in the middle (a nested function).
struct NormFunction {
  std::vector<std::string> dispatched;  // ops dispatched by the latest call
  std::function<void()> inner;
  bool fail = false;

  std::vector<Tensor> operator()(std::span<const Tensor> inputs) {
    RecordingHandler recorder;
    Tensor out;
    {
      DispatchHandlerGuard guard(&recorder);
      out = ops::rms_norm(inputs[0], inputs[1], 1e-5);
    }
    dispatched = recorder.names;
    if (inner) inner();
    if (fail) throw std::runtime_error("the function failed");
    return {out};
  }
};

CompileOptions eager_with(const std::vector<std::string>& custom_ops) {
  CompileOptions options;
  options.backend = "eager";
  options.custom_ops = CustomOpConfig::parse(custom_ops, true);
  return options;
}

bool ran_kernel(const std::vector<std::string>& dispatched) {
  return dispatched == std::vector<std::string>{"rms_norm"};
}

}  // namespace

TEST(CompiledFunction, EachEagerFunctionAppliesItsOwnCustomOpRule) {
  std::vector<Tensor> inputs{random_tensor({4, 32}, 1), random_tensor({32}, 2)};
  auto kernel_state = std::make_shared<NormFunction>();
  auto decomposed_state = std::make_shared<NormFunction>();
  CompiledFunction kernel([kernel_state](auto in) { return (*kernel_state)(in); },
                          eager_with({"all"}));
  CompiledFunction decomposed([decomposed_state](auto in) { return (*decomposed_state)(in); },
                              eager_with({"none"}));
  for (int round = 0; round < 2; ++round) {  // interleaved calls
    kernel(inputs);
    EXPECT_TRUE(ran_kernel(kernel_state->dispatched))
        << fmt::format("{}", fmt::join(kernel_state->dispatched, ", "));
    decomposed(inputs);
    EXPECT_FALSE(ran_kernel(decomposed_state->dispatched));
    EXPECT_GT(decomposed_state->dispatched.size(), 1u);  // rms_norm, then its primitives
    EXPECT_TRUE(eager_custom_op_enabled("rms_norm"));    // no rule outside a call
  }
  // Nested: the inner function's rule holds inside it, the outer's again after it returns.
  std::vector<std::string> outer_after_inner;
  kernel_state->inner = [&] {
    decomposed(inputs);
    outer_after_inner = {eager_custom_op_enabled("rms_norm") ? "enabled" : "disabled"};
  };
  kernel(inputs);
  EXPECT_TRUE(ran_kernel(kernel_state->dispatched));
  EXPECT_FALSE(ran_kernel(decomposed_state->dispatched));
  EXPECT_EQ(outer_after_inner, std::vector<std::string>{"enabled"});
  kernel_state->inner = {};
  // An exception leaves no rule behind.
  decomposed_state->fail = true;
  EXPECT_THROW(decomposed(inputs), std::runtime_error);
  EXPECT_TRUE(eager_custom_op_enabled("rms_norm"));
  kernel(inputs);
  EXPECT_TRUE(ran_kernel(kernel_state->dispatched));
}

TEST(CompiledFunction, TracedFunctionRecordsDisabledCustomOpsAsTheirDecomposition) {
  std::vector<Tensor> inputs{random_tensor({4, 32}, 1), random_tensor({32}, 2)};
  auto forward = [](std::span<const Tensor> in) {
    return std::vector<Tensor>{ops::rms_norm(in[0], in[1], 1e-5)};
  };
  auto count_rms_norm = [](const CompiledFunction& function) {
    size_t count = 0;
    for (const Node& node : function.entries().at(0).trace.graph.nodes())
      count += node.op != nullptr && node.op->name == "rms_norm";
    return count;
  };
  CompileOptions enabled = eager_with({"all"}), disabled = eager_with({"none"});
  enabled.backend = disabled.backend = "traced";
  CompiledFunction with_kernel(forward, enabled), without_kernel(forward, disabled);
  with_kernel(inputs);
  without_kernel(inputs);
  EXPECT_EQ(count_rms_norm(with_kernel), 1u);
  EXPECT_EQ(count_rms_norm(without_kernel), 0u);
}
