// The step profiler (runtime/profiler/profiler.h): launches recorded once however they nest, named
// by the innermost region and annotated by the GEMM path, nothing computed without an active
// profiler; and a compiled model step on the CPU timed per launch with its pieces, attention and
// logits, counted the same by a counting profiler, and printed as tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine/runner/model_runner.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "models/loaders/loaders.h"
#include "runtime/profiler/profile_report.h"
#include "runtime/profiler/profiler.h"
#include "support/runner_steps.h"
#include "support/test_tensors.h"

namespace tessera {
namespace {

TEST(StepProfiler, NestedLaunchesCountOnceUnderTheirRegionWithTheirAnnotation) {
  KernelProfiler profiler(kCPU, /*timing=*/true);
  {
    ProfilerScope active(profiler);
    EXPECT_EQ(active_profiler(), &profiler);
    profiler.start();
    {
      ProfileRegion region("piece", 2);
      ProfiledLaunch outer("linear", KernelClass::gemm, [] {
        return LaunchDetail{100, 200, "1x2x3 f32"};
      });
      ProfiledLaunch inner("copy", KernelClass::copy);
      annotate_launch("mma_t1");
    }
    ProfiledLaunch after("argmax", KernelClass::sampling);
  }
  EXPECT_EQ(active_profiler(), nullptr);
  profiler.stop();
  ASSERT_EQ(profiler.launches().size(), 2u);
  const LaunchRecord& gemm = profiler.launches()[0];
  EXPECT_EQ(gemm.name, "linear[mma_t1]");
  EXPECT_EQ(gemm.region, "piece 2");
  EXPECT_EQ(gemm.detail.bytes, 100);
  EXPECT_EQ(gemm.detail.flops, 200);
  EXPECT_EQ(profiler.launches()[1].region, "step");
  EXPECT_EQ(profiler.launch_counts()[static_cast<size_t>(KernelClass::gemm)], 1u);
  EXPECT_EQ(profiler.launch_counts()[static_cast<size_t>(KernelClass::copy)], 0u);
  for (const LaunchRecord& launch : profiler.launches()) {
    EXPECT_LE(launch.start_ms, launch.end_ms);
    EXPECT_LE(launch.end_ms, profiler.step_ms());
  }
}

TEST(StepProfiler, NothingIsComputedOrRecordedWithoutAnActiveProfiler) {
  bool computed = false;
  {
    ProfileRegion region("piece", 0);
    ProfiledLaunch launch("linear", KernelClass::gemm, [&] {
      computed = true;
      return LaunchDetail{};
    });
    annotate_launch("cublaslt");
    ProfiledGraphReplay replay(10);
  }
  EXPECT_FALSE(computed);
}

// Two steps of one sequence (a prefill of 8 tokens, then a decode step) through a compiled runner.
void run_two_steps(ModelRunner& runner) {
  std::vector<int32_t> ids{5, 17, 42, 7, 99, 3, 12, 64, 8};
  testing::logits_by_chunks(runner, ids, {8, 1});
}

TEST(StepProfiler, CompiledStepsAreTimedPerLaunchAndCountedTheSame) {
  auto model =
      std::shared_ptr<const CausalLM>(create_model(load_model("synthetic:qwen3-tiny", {}), 256));
  RunnerConfig options = testing::runner_config(CompilationMode::compiled);
  options.compilation.cache_dir = testing::fresh_temp_dir("cache_profiler");
  options.scheduler.max_num_batched_tokens = 64;
  options.compilation.custom_ops = {"none"};
  ModelRunner runner(model, with_kv_blocks_for(options, model->max_positions()));
  run_two_steps(runner);  // compiles

  KernelProfiler timer(kCPU, /*timing=*/true);
  {
    ProfilerScope active(timer);
    timer.start();
    run_two_steps(runner);
    timer.stop();
  }
  KernelProfiler counter(kCPU, /*timing=*/false);
  {
    ProfilerScope active(counter);
    counter.start();
    run_two_steps(runner);
    counter.stop();
  }
  EXPECT_EQ(counter.launch_counts(), timer.launch_counts());
  EXPECT_TRUE(counter.launches().empty());

  const auto count = [&](KernelClass kind) {
    return timer.launch_counts()[static_cast<size_t>(kind)];
  };
  const size_t layers = static_cast<size_t>(model->config().num_layers);
  EXPECT_EQ(count(KernelClass::attention), 2 * layers);  // one per layer per step
  EXPECT_GT(count(KernelClass::gemm), 2 * layers);
  EXPECT_GT(count(KernelClass::fused), 0u);
  std::set<std::string> regions;
  double previous_start = 0;
  for (const LaunchRecord& launch : timer.launches()) {
    regions.insert(launch.region);
    EXPECT_GE(launch.start_ms, previous_start) << launch.name;  // stream order
    EXPECT_LE(launch.start_ms, launch.end_ms) << launch.name;
    previous_start = launch.start_ms;
    if (launch.kind == KernelClass::gemm) {
      EXPECT_GT(launch.detail.flops, 0) << launch.name;
      EXPECT_GT(launch.detail.bytes, 0) << launch.name;
    }
    if (launch.kind == KernelClass::attention) {
      EXPECT_GT(launch.detail.flops, 0);
    }
  }
  for (const char* region : {"piece 0", "attention 0", "logits"}) {
    EXPECT_EQ(regions.count(region), 1u) << region;
  }

  const std::string tables = format_profile(timer, ProfileCeilings{100, 0}, 10);
  for (const char* part :
       {"by class", "between launches", "by region", "piece 0", "kernels by total time"}) {
    EXPECT_NE(tables.find(part), std::string::npos) << part << "\n" << tables;
  }
  EXPECT_NE(format_launch_counts(counter).find("launched from the host"), std::string::npos);
}

}  // namespace
}  // namespace tessera
