// Tracing: graphs of small functions, guards and recompiles, custom ops on/off, traced == eager.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compile/compiled_function.h"
#include "compile/ops/ops.h"
#include "compile/trace/fake_tensor.h"
#include "compile/trace/tracer.h"
#include "runtime/check.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;

namespace {

// A small norm + gated MLP block, written once against ops::.
std::vector<Tensor> mlp_block(std::span<const Tensor> inputs, const Tensor& norm_weight,
                              const Tensor& gate_up, const Tensor& down) {
  Tensor h = ops::rms_norm(inputs[0], norm_weight, 1e-5);
  Tensor y = ops::linear(ops::silu_and_mul(ops::linear(h, gate_up)), down);
  return {ops::add(inputs[0], y)};
}

}  // namespace

TEST(Tracer, PrintsAReadableGraphWithSymbolicShapes) {
  auto function = [](std::span<const Tensor> inputs) {
    Tensor squared = ops::mul(inputs[0], inputs[0]);
    return std::vector<Tensor>{ops::add_scalar(ops::mean(squared, true), 1e-5),
                               ops::softmax(inputs[1])};
  };
  std::vector<Tensor> inputs{random_tensor({5, 64}, 1), random_tensor({5, 3}, 2)};
  TraceOptions options;
  options.dynamic_dims = {{0, 0}, {1, 0}};
  options.input_names = {"x", "y"};
  TraceResult result = trace(function, inputs, options);
  EXPECT_EQ(result.graph.str(),
            "graph(s0):\n"
            "  %x: f32[s0, 64] = placeholder[0]\n"
            "  %y: f32[s0, 3] = placeholder[1]\n"
            "  %v2: f32[s0, 64] = mul(%x, %x)\n"
            "  %v3: f32[s0, 1] = mean(%v2, keepdim=true)\n"
            "  %v4: f32[s0, 1] = add_scalar(%v3, scalar=1e-05)\n"
            "  %v5: f32[s0, 3] = softmax(%y)\n"
            "  return (%v4, %v5)\n");
  EXPECT_TRUE(result.guards.empty()) << result.str();
  EXPECT_EQ(result.hints.at("s0"), 5);
}

TEST(Tracer, DuckShapingSharesSymbolsUnlessDistinct) {
  auto function = [](std::span<const Tensor> inputs) {
    return std::vector<Tensor>{ops::neg(inputs[0]), ops::neg(inputs[1])};
  };
  std::vector<Tensor> inputs{random_tensor({6, 4}, 1), random_tensor({6, 4}, 2)};
  TraceOptions options;
  options.dynamic_dims = {{0, 0}, {1, 0}};
  EXPECT_TRUE(
      trace(function, inputs, options).input_metas[1].shape[0].same_as(SymInt::symbol("s0")));
  options.dynamic_dims = {{0, 0}, {1, 0, /*distinct=*/true}};
  EXPECT_TRUE(
      trace(function, inputs, options).input_metas[1].shape[0].same_as(SymInt::symbol("s1")));
}

TEST(Tracer, RealTensorsBecomeConstantsOnce) {
  Tensor weight = random_tensor({4, 4}, 3);
  auto function = [&](std::span<const Tensor> inputs) {
    return std::vector<Tensor>{ops::linear(ops::linear(inputs[0], weight), weight)};
  };
  std::vector<Tensor> inputs{random_tensor({2, 4}, 4)};
  TraceResult result = trace(function, inputs, {});
  int constants = 0;
  for (const Node& node : result.graph.nodes()) constants += node.kind == NodeKind::constant;
  EXPECT_EQ(constants, 1);
  EXPECT_EQ(result.graph.num_calls(), 2u);
}

TEST(Tracer, StructuralHashIgnoresConstantValuesAndNames) {
  auto make = [](uint32_t seed) {
    Tensor weight = random_tensor({4, 4}, seed);
    return [weight](std::span<const Tensor> inputs) {
      return std::vector<Tensor>{ops::silu(ops::linear(inputs[0], weight))};
    };
  };
  std::vector<Tensor> inputs{random_tensor({3, 4}, 5)};
  TraceOptions options;
  options.dynamic_dims = {{0, 0}};
  Graph first = trace(make(1), inputs, options).graph;
  options.input_names = {"tokens"};
  Graph second = trace(make(2), inputs, options).graph;
  EXPECT_EQ(first.hash(), second.hash());
  auto other = [](std::span<const Tensor> in) { return std::vector<Tensor>{ops::exp(in[0])}; };
  EXPECT_NE(first.hash(), trace(other, inputs, options).graph.hash());
}

TEST(Tracer, FunctionThatDoesNotBranchRecordsNoGuardAndCompilesOnce) {
  Tensor norm = random_tensor({8}, 1), gate_up = random_tensor({12, 8}, 2),
         down = random_tensor({8, 6}, 3);
  auto function = [&](std::span<const Tensor> inputs) {
    return mlp_block(inputs, norm, gate_up, down);
  };
  CompileOptions options;
  options.dynamic_dims = {{0, 0}};
  CompiledFunction compiled(function, options);
  for (int64_t tokens : {1, 7, 33, 2}) {
    std::vector<Tensor> inputs{random_tensor({tokens, 8}, static_cast<uint32_t>(tokens))};
    std::vector<Tensor> got = compiled(inputs);
    std::vector<Tensor> want = function(inputs);
    EXPECT_LT(max_abs_difference(got[0], want[0]), 1e-5) << "tokens " << tokens;
  }
  EXPECT_EQ(compiled.num_compiles(), 1u);
  EXPECT_TRUE(compiled.entries()[0].trace.guards.empty()) << compiled.entries()[0].trace.str();
}

TEST(Tracer, BranchOnTokenCountRecordsOneGuardAndRecompilesWhenItFlips) {
  auto function = [](std::span<const Tensor> inputs) {
    const Tensor& x = inputs[0];
    if (sym_size(x, 0) > 16) return std::vector<Tensor>{ops::exp(x)};  // the guarded branch
    return std::vector<Tensor>{ops::neg(x)};
  };
  CompileOptions options;
  options.dynamic_dims = {{0, 0}};
  CompiledFunction compiled(function, options);
  std::vector<Tensor> small{random_tensor({4, 3}, 1)};
  std::vector<Tensor> small2{random_tensor({9, 3}, 2)};
  std::vector<Tensor> large{random_tensor({20, 3}, 3)};
  compiled(small);
  ASSERT_EQ(compiled.num_compiles(), 1u);
  const auto& guards = compiled.entries()[0].trace.guards;
  ASSERT_EQ(guards.size(), 1u);
  EXPECT_EQ(guards[0].condition.str(), "s0 <= 16");
  EXPECT_THAT(guards[0].where, HasSubstr("test_tracer.cpp:"));
  compiled(small2);
  EXPECT_EQ(compiled.num_compiles(), 1u);
  std::vector<Tensor> got = compiled(large);
  EXPECT_EQ(compiled.num_compiles(), 2u);
  EXPECT_THAT(compiled.last_miss_reason(), HasSubstr("s0 <= 16"));
  EXPECT_LT(max_abs_difference(got[0], ops::exp(large[0])), 1e-6);
  EXPECT_LT(max_abs_difference(compiled(small)[0], ops::neg(small[0])), 1e-6);
  EXPECT_EQ(compiled.num_compiles(), 2u);
}

TEST(Tracer, SpecializingOnASizeRecordsAnEqualityGuard) {
  auto function = [](std::span<const Tensor> inputs) {
    int64_t rows = inputs[0].size(0);  // concrete size of a traced tensor: specializes
    return std::vector<Tensor>{ops::mul_scalar(inputs[0], static_cast<double>(rows))};
  };
  CompileOptions options;
  options.dynamic_dims = {{0, 0}};
  options.recompile_limit = 2;
  CompiledFunction compiled(function, options);
  for (int64_t rows : {3, 3, 5}) compiled(std::vector<Tensor>{random_tensor({rows, 2}, 1)});
  EXPECT_EQ(compiled.num_compiles(), 2u);
  EXPECT_EQ(compiled.entries()[0].trace.guards.at(0).condition.str(), "s0 == 3");
  EXPECT_THAT(compiled.entries()[0].trace.guards.at(0).where, HasSubstr("test_tracer.cpp:"));
  // Past the limit: runs eagerly (still correct) and says why.
  std::vector<Tensor> inputs{random_tensor({7, 2}, 2)};
  std::vector<Tensor> got = compiled(inputs);
  EXPECT_TRUE(compiled.fell_back_to_eager());
  EXPECT_EQ(compiled.num_compiles(), 2u);
  EXPECT_LT(max_abs_difference(got[0], ops::mul_scalar(inputs[0], 7.0)), 1e-6);
}

TEST(Tracer, StaticInputSizesAreChecked) {
  auto function = [](std::span<const Tensor> inputs) {
    return std::vector<Tensor>{ops::neg(inputs[0])};
  };
  TraceResult result = trace(function, std::vector<Tensor>{random_tensor({4, 3}, 1)}, {});
  Bindings bindings;
  EXPECT_EQ(check_trace_fits(result, std::vector<Tensor>{random_tensor({4, 3}, 2)}, &bindings), "");
  EXPECT_THAT(check_trace_fits(result, std::vector<Tensor>{random_tensor({5, 3}, 2)}, &bindings),
              HasSubstr("static size 4"));
  EXPECT_THAT(check_trace_fits(result, std::vector<Tensor>{random_tensor({4, 3}, 2, DType::bf16)},
                               &bindings),
              HasSubstr("bf16"));
}

TEST(Tracer, CustomOpsAreRecordedWholeOrAsTheirDecomposition) {
  Tensor norm = random_tensor({8}, 1), gate_up = random_tensor({12, 8}, 2),
         down = random_tensor({8, 6}, 3);
  auto function = [&](std::span<const Tensor> inputs) {
    return mlp_block(inputs, norm, gate_up, down);
  };
  std::vector<Tensor> inputs{random_tensor({5, 8}, 4)};
  TraceOptions options;
  options.dynamic_dims = {{0, 0}};
  options.custom_ops = CustomOpConfig::parse({"all"}, false);
  std::string whole = trace(function, inputs, options).graph.str();
  EXPECT_THAT(whole, HasSubstr("rms_norm("));
  EXPECT_THAT(whole, HasSubstr("silu_and_mul("));
  options.custom_ops = CustomOpConfig::parse({"none", "+silu_and_mul"}, false);
  std::string decomposed = trace(function, inputs, options).graph.str();
  EXPECT_THAT(decomposed, ::testing::Not(HasSubstr("rms_norm(")));
  EXPECT_THAT(decomposed, HasSubstr("rsqrt("));
  EXPECT_THAT(decomposed, HasSubstr("silu_and_mul("));
}

TEST(Tracer, CustomOpOnAndOffGiveTheSameNumbers) {
  Tensor norm = random_tensor({8}, 1), gate_up = random_tensor({12, 8}, 2),
         down = random_tensor({8, 6}, 3);
  auto function = [&](std::span<const Tensor> inputs) {
    return mlp_block(inputs, norm, gate_up, down);
  };
  for (const char* config : {"all", "none", "-rms_norm"}) {
    CompileOptions options;
    options.dynamic_dims = {{0, 0}};
    options.custom_ops = CustomOpConfig::parse({config}, false);
    CompiledFunction compiled(function, options);
    for (int64_t tokens : {1, 6, 17}) {
      std::vector<Tensor> inputs{random_tensor({tokens, 8}, static_cast<uint32_t>(10 + tokens))};
      EXPECT_LT(max_abs_difference(compiled(inputs)[0], function(inputs)[0]), 1e-5)
          << config << " tokens " << tokens;
    }
  }
}

TEST(Tracer, MisuseGivesClearErrors) {
  try {
    CustomOpConfig::parse({"+rms_nrm"}, false);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("rms_nrm"));
    EXPECT_THAT(error.what(), HasSubstr("rms_norm"));  // lists the valid names
  }
  EXPECT_THROW(CustomOpConfig::parse({"+add"}, false), Error);  // not a custom op
  EXPECT_THROW(CustomOpConfig::parse({"all", "none"}, false), Error);
  EXPECT_THROW(CustomOpConfig::parse({"rms_norm"}, false), Error);  // no +/- prefix
  OpRegistry registry;
  OpDef no_meta;
  no_meta.name = "op_without_meta";
  try {
    registry.add(no_meta);
    FAIL() << "expected an error";
  } catch (const InternalError& error) {
    EXPECT_THAT(error.what(), HasSubstr("op_without_meta"));
  }
  CompileOptions unknown_backend;
  unknown_backend.backend = "inductor";
  EXPECT_THROW(CompiledFunction([](std::span<const Tensor>) { return std::vector<Tensor>{}; },
                                unknown_backend),
               Error);
  auto returns_input_copy = [](std::span<const Tensor>) {
    return std::vector<Tensor>{Tensor::from_floats(std::vector<float>{1.0f}, {1})};
  };
  EXPECT_THROW(trace(returns_input_copy, std::vector<Tensor>{random_tensor({1}, 1)}, {}), Error);
}

TEST(Tracer, UserBackendsReceiveTheGraph) {
  size_t seen_calls = 0;
  register_compile_backend("counting", [&](const Graph& graph, std::span<const Tensor>) {
    seen_calls = graph.num_calls();
    return compile_backend("traced")(graph, {});
  });
  auto function = [](std::span<const Tensor> inputs) {
    return std::vector<Tensor>{ops::sigmoid(ops::exp(inputs[0]))};
  };
  CompileOptions options;
  options.backend = "counting";
  CompiledFunction compiled(function, options);
  std::vector<Tensor> inputs{random_tensor({3, 3}, 1)};
  EXPECT_LT(max_abs_difference(compiled(inputs)[0], function(inputs)[0]), 1e-6);
  EXPECT_EQ(seen_calls, 2u);
  EXPECT_THAT(fmt::format("{}", fmt::join(compile_backend_names(), ",")), HasSubstr("counting"));
}
