// The pass manager (compile/passes/pass_manager.h): which passes it runs, in which order, for a
// pass_config and a device; the dumps named after each pass; the time of each pass in explain;
// the custom ops the passes need traced; and the match-and-rewrite helper that the pattern passes
// share (compile/passes/graph_rewrite.h), on a small graph.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "compile/codegen/codegen_target.h"
#include "compile/compiler.h"
#include "compile/ops/ops.h"
#include "compile/passes/graph_rewrite.h"
#include "compile/passes/pass_manager.h"
#include "compile/trace/tracer.h"
#include "runtime/check.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

namespace {

const Device kCuda{DeviceType::cuda, 0};

std::vector<std::string> pipeline_for(const CompilationConfig& config, Device device) {
  return PassManager({.config = config, .device = device}).names();
}

size_t count_op(const Graph& graph, const std::string& name) {
  size_t count = 0;
  for (const Node& node : graph.nodes())
    count += node.kind == NodeKind::call && node.op->name == name;
  return count;
}

}  // namespace

TEST(PassManager, RunsThePassesThatApplyToTheConfigAndDeviceInOrder) {
  CompilationConfig config;
  EXPECT_THAT(pipeline_for(config, kCPU),
              ElementsAre("cleanup", "rotary_attention", "split", "fuse", "materialize",
                          "follows_splitting", "memory_plan", "codegen"));
  // On CUDA the weight prefetch runs too; fusion needs the GPU module's code generator.
  std::vector<std::string> cuda{"cleanup", "rotary_attention", "split"};
  if (has_codegen_target(DeviceType::cuda)) cuda.push_back("fuse");
  for (const char* name :
       {"materialize", "follows_splitting", "weight_prefetch", "memory_plan", "codegen"})
    cuda.push_back(name);
  EXPECT_THAT(pipeline_for(config, kCuda), ElementsAreArray(cuda));

  // Every switch flipped: the linear prologue joins after cleanup; the others leave.
  config.pass_config.enable_linear_prologue_fusion = true;
  config.pass_config.enable_rotary_attention_fusion = false;
  config.pass_config.enable_fusion = false;
  config.pass_config.enable_weight_prefetch = false;
  EXPECT_THAT(pipeline_for(config, kCPU),
              ElementsAre("cleanup", "linear_prologue", "split", "materialize", "follows_splitting",
                          "memory_plan", "codegen"));
  EXPECT_THAT(pipeline_for(config, kCuda),
              ElementsAre("cleanup", "linear_prologue", "split", "materialize", "follows_splitting",
                          "memory_plan", "codegen"));
}

TEST(PassManager, RunsOnlyTheNamedPassesInPipelineOrderAndRefusesAnUnknownName) {
  const CompilationConfig config;
  const PassContext context{.config = config, .device = kCPU};
  EXPECT_THAT(PassManager(context, {"fuse", "cleanup", "weight_prefetch"}).names(),
              ElementsAre("cleanup", "fuse"));  // weight_prefetch: not on the CPU
  try {
    PassManager(context, {"cleanup", "fusion"});
    FAIL() << "an unknown pass name was accepted";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("'fusion'"));
    EXPECT_THAT(error.what(), HasSubstr("memory_plan"));  // the registered names are listed
  }
}

TEST(PassManager, DumpsAreNamedAfterEachPassInOrderAndExplainTimesEachPass) {
  const std::string dumps = fresh_temp_dir("pass_dumps");
  auto function = [](std::span<const Tensor> in) {
    return std::vector<Tensor>{ops::softmax(ops::add_scalar(ops::mul(in[0], in[0]), 0.25))};
  };
  TraceOptions trace_options;
  trace_options.dynamic_dims = {{0, 0}};
  Graph graph = trace(function, std::vector<Tensor>{random_tensor({4, 8}, 1)}, trace_options).graph;
  CompilerOptions options;
  options.config.cache_dir = fresh_temp_dir("pass_dumps_cache");
  options.config.dump_dir = dumps;
  options.name = "function";
  std::shared_ptr<CompiledPlan> plan = compile_graph(graph, options);

  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dumps + "/function"))
    files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_THAT(files, ElementsAre("00-traced.txt", "01-cleanup.txt", "02-rotary_attention.txt",
                                 "03-split.txt", "04-fuse.txt", "05-materialize.txt",
                                 "06-follows_splitting.txt", "07-memory_plan.txt", "08-codegen.txt",
                                 "explain.txt", "kernels"));
  auto text_of = [&](const std::string& file) {
    std::stringstream text;
    text << std::ifstream(dumps + "/function/" + file).rdbuf();
    return text.str();
  };
  EXPECT_THAT(text_of("00-traced.txt"), HasSubstr("mul"));
  EXPECT_THAT(text_of("04-fuse.txt"), HasSubstr("fused fused_0_mul"));
  EXPECT_THAT(text_of("07-memory_plan.txt"), HasSubstr("arena"));
  EXPECT_THAT(text_of("08-codegen.txt"), HasSubstr("fused_0_mul"));
  EXPECT_TRUE(std::filesystem::exists(dumps + "/function/kernels/fused_0_mul.cpp"));

  // One timing per pass run, in order, each shown by explain.
  std::vector<std::string> timed;
  for (const PassTiming& timing : plan->timings) timed.push_back(timing.pass);
  EXPECT_EQ(timed, pipeline_for(options.config, kCPU));
  const std::string explain = plan->explain();
  EXPECT_THAT(explain, HasSubstr("time per pass:"));
  for (const std::string& pass : timed)
    EXPECT_THAT(explain, ::testing::ContainsRegex("\n  " + pass + " +[0-9]+\\.[0-9] ms\n"));
}

TEST(PassManager, TracesTheCustomOpsItsPassesMatch) {
  const CustomOpConfig none = CustomOpConfig::parse({"none"}, false);
  PassConfig config;
  EXPECT_TRUE(custom_ops_for_passes(none, config).enabled("rotary_embedding"));
  EXPECT_FALSE(custom_ops_for_passes(none, config).enabled("rms_norm"));
  // Disabled by name, it stays disabled; with the pass off, nothing is added.
  EXPECT_FALSE(
      custom_ops_for_passes(CustomOpConfig::parse({"none", "-rotary_embedding"}, false), config)
          .enabled("rotary_embedding"));
  config.enable_rotary_attention_fusion = false;
  EXPECT_FALSE(custom_ops_for_passes(none, config).enabled("rotary_embedding"));
}

// exp(neg(v)) becomes sigmoid(v) (not the same numbers: only the rewrite is under test) where the
// neg has no other reader.
TEST(GraphRewrite, ReplacesEachMatchAndDropsWhatItAbsorbs) {
  auto function = [](std::span<const Tensor> in) {
    Tensor matched = ops::exp(ops::neg(in[0]));
    Tensor shared = ops::neg(in[1]);  // also read by the add: no match
    return std::vector<Tensor>{matched, ops::add(shared, ops::exp(shared))};
  };
  Graph graph =
      trace(function, std::vector<Tensor>{random_tensor({2, 3}, 1), random_tensor({2, 3}, 2)}, {})
          .graph;
  const std::vector<int> inputs = graph.placeholders();
  const Matcher match = [](const Graph& graph, const ValueUses& uses,
                           int exp) -> std::optional<Replacement> {
    const Node& node = graph.nodes()[exp];
    const int neg = graph.value(node.inputs[0]).producer;
    if (graph.nodes()[neg].kind != NodeKind::call || graph.nodes()[neg].op->name != "neg" ||
        !uses.only_reader(node.inputs[0], exp))
      return std::nullopt;
    return Replacement{.absorbed = {neg},
                       .op = &OpRegistry::global().get("sigmoid"),
                       .inputs = {graph.nodes()[neg].inputs[0]},
                       .output_metas = {graph.value(node.outputs[0]).meta}};
  };
  EXPECT_EQ(rewrite_matches(graph, "exp", match), 1u);
  EXPECT_EQ(count_op(graph, "sigmoid"), 1u) << graph.str();
  EXPECT_EQ(count_op(graph, "neg"), 1u) << graph.str();
  EXPECT_EQ(count_op(graph, "exp"), 1u) << graph.str();
  // The first output is the sigmoid, reading the first input.
  const Node& sigmoid = graph.nodes()[graph.value(graph.outputs()[0]).producer];
  EXPECT_EQ(sigmoid.op->name, "sigmoid");
  EXPECT_EQ(sigmoid.inputs, std::vector<int>{graph.placeholders()[0]});
  EXPECT_EQ(graph.placeholders().size(), inputs.size());
  // Nothing left to match: the graph stays as it is.
  const std::string before = graph.str();
  EXPECT_EQ(rewrite_matches(graph, "exp", match), 0u);
  EXPECT_EQ(graph.str(), before);
}
