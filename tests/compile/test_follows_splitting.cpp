// The follows-splitting pass (compile/passes/follows_splitting.cpp): which steps it marks as
// launching right after a splitting op, on a hand-made step list and on the stories260K plan,
// where each o projection (the first step after each attention) carries the mark and `explain`
// shows it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compile/passes/pass_manager.h"
#include "engine/runner/model_runner.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "support/runner_steps.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

std::vector<bool> marks(const CompiledPlan& plan) {
  std::vector<bool> out;
  for (const Step& step : plan.steps) out.push_back(step.follows_splitting_op);
  return out;
}

TEST(FollowsSplitting, MarksTheFirstLaunchAfterEachSplittingOp) {
  CompiledPlan plan;
  const StepKind kinds[] = {StepKind::library,   StepKind::splitting, StepKind::view,
                            StepKind::library,   StepKind::fused,     StepKind::splitting,
                            StepKind::copy,      StepKind::library,   StepKind::splitting,
                            StepKind::splitting, StepKind::fused};
  for (StepKind kind : kinds) plan.steps.push_back(Step{kind});
  plan.steps[4].follows_splitting_op = true;  // a stale mark is cleared
  const CompilationConfig config;
  PassManager({.config = config, .device = kCPU}, {"follows_splitting"}).run(plan);
  // The view launches nothing (the library after it is the first launch); the copy is a launch;
  // a splitting op after a splitting op is not marked, the fused kernel after both is.
  EXPECT_EQ(marks(plan), (std::vector<bool>{false, false, false, true, false, false, true, false,
                                            false, false, true}));
}

TEST(FollowsSplitting, EachOProjectionOfStories260KIsMarked) {
  const std::string dir = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";
  auto model =
      std::shared_ptr<const CausalLM>(create_model(load_model(dir + "/stories260K.bin", {}), 512));
  RunnerConfig options;
  options.compilation.mode = CompilationMode::compiled;
  options.compilation.cache_dir = fresh_temp_dir("cache_follows_splitting");
  ModelRunner runner(model, with_kv_blocks_for(options, model->max_positions()));
  const std::vector<int32_t> tokens{1, 2, 3};
  const std::vector<int32_t> blocks{0};
  runner.execute(std::vector<SequenceInput>{{tokens, 0, blocks}});
  const std::shared_ptr<const CompiledPlan> plan = runner.latest_plan();
  ASSERT_NE(plan, nullptr);
  int marked = 0;
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const Step& step = plan->steps[i];
    if (!step.follows_splitting_op) continue;
    ++marked;
    ASSERT_EQ(step.kind, StepKind::library) << "step " << i;
    EXPECT_EQ(plan->graph.nodes()[step.node].op->name, "linear") << "step " << i;
    ASSERT_GT(i, 0u);
    EXPECT_EQ(plan->steps[i - 1].kind, StepKind::splitting) << "step " << i;
  }
  EXPECT_EQ(marked, 5);  // five layers, one attention each
  const std::string explain = plan->explain();
  size_t shown = 0;
  for (size_t at = explain.find("(follows a splitting op)"); at != std::string::npos;
       at = explain.find("(follows a splitting op)", at + 1))
    ++shown;
  EXPECT_EQ(shown, 5u) << explain;
}

}  // namespace
