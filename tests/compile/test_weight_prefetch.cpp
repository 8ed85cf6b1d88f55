// The weight-prefetch pass (compile/passes/weight_prefetch.cpp): which steps it marks with which
// weight, what it leaves alone, stale marks cleared, `explain` (its switch and device:
// test_pass_manager.cpp); on a GPU, that GEMMs asked to prefetch (every skinny variant; the
// library's path, which leaves the hint) give the same bits as without, even for a weight that is
// not 16-byte aligned, and that a compiled CUDA plan carries the marks and matches the plan
// without them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "compile/compiled_function.h"
#include "compile/compiler.h"
#include "compile/ops/ops.h"
#include "compile/passes/pass_manager.h"
#include "compile/trace/dispatch.h"
#include "kernels/cuda/gemm/l2_prefetch.h"
#include "kernels/linear_path.h"
#include "runtime/backend/backend.h"
#include "runtime/kernel_registry.h"
#include "support/compile_options.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

using Function = std::function<std::vector<Tensor>(std::span<const Tensor>)>;

struct Compiled {
  std::shared_ptr<const CompiledPlan> plan;
  std::unique_ptr<CompiledFunction> function;
};

Compiled compile(const Function& function, bool prefetch, const std::string& cache_name) {
  Compiled compiled;
  CompilerOptions options = test_compiler_options(fresh_temp_dir(cache_name));
  options.config.pass_config.enable_weight_prefetch = prefetch;
  compiled.function = std::make_unique<CompiledFunction>(
      function, compiled_mode_options(options, {{0, 0}}, CustomOpConfig::parse({"none"}, false),
                                      [&compiled](auto plan) { compiled.plan = plan; }));
  return compiled;
}

// The weight-prefetch pass run on `plan` as the manager runs it for a CUDA plan under `config`.
void prefetch_as_for_cuda(CompiledPlan& plan, const CompilationConfig& config) {
  PassManager({.config = config, .device = Device{DeviceType::cuda, 0}}, {"weight_prefetch"})
      .run(plan);
}

// The constant weight each linear step reads, in step order, with the step's index.
std::vector<std::pair<size_t, int>> linear_steps(const CompiledPlan& plan) {
  std::vector<std::pair<size_t, int>> found;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& step = plan.steps[i];
    if (step.kind != StepKind::library) continue;
    const Node& node = plan.graph.nodes()[step.node];
    if (node.op->name == "linear") found.emplace_back(i, node.inputs[1]);
  }
  return found;
}

// Linears with pointwise work between them; a matmul of two computed values (no streamed weight:
// not a GEMM step for the pass); a linear whose weight is computed (never prefetched: the linear
// before it gets no mark, and it prefetches the next constant itself); a weight used twice
// (second: the step before each use prefetches it like any other).
struct Layers {
  Tensor first = random_tensor({48, 32}, 1);
  Tensor second = random_tensor({32, 48}, 2);
  Tensor third = random_tensor({48, 32}, 3);
  Tensor fourth = random_tensor({32, 48}, 12);
  Function function = [this](std::span<const Tensor> in) {
    Tensor h = ops::linear(ops::add(in[0], in[0]), first);    // [t, 48]
    h = ops::linear(h, second);                               // [t, 32]
    Tensor square = ops::matmul(h, ops::transpose(h, 0, 1));  // [t, t]
    h = ops::linear(ops::mul(h, h), third);                   // [t, 48]
    h = ops::linear(ops::add(h, h), fourth);                  // [t, 32]
    h = ops::linear(h, ops::add(third, third));               // a computed weight [48, 32]: [t, 48]
    return std::vector<Tensor>{ops::linear(h, second), square};
  };
};

TEST(WeightPrefetch, EachGemmPrefetchesTheNextGemmsWeight) {
  Layers layers;
  Compiled compiled = compile(layers.function, true, "prefetch_marks");
  std::vector<Tensor> inputs{random_tensor({5, 32}, 4)};
  (void)(*compiled.function)(inputs);
  ASSERT_NE(compiled.plan, nullptr);
  // The compiler runs the pass for CUDA plans only: this CPU plan has no marks.
  for (const Step& step : compiled.plan->steps) EXPECT_EQ(step.prefetch, -1);

  CompiledPlan plan = *compiled.plan;
  CompilationConfig config;
  prefetch_as_for_cuda(plan, config);
  const std::vector<std::pair<size_t, int>> linears = linear_steps(plan);
  ASSERT_EQ(linears.size(), 6u) << plan.explain();
  auto is_constant = [&](int value) {
    return plan.graph.nodes()[plan.graph.value(value).producer].kind == NodeKind::constant;
  };
  ASSERT_FALSE(is_constant(linears[4].second)) << "the fifth linear's weight is computed";
  for (size_t i = 0; i + 1 < linears.size(); ++i) {
    const int want = is_constant(linears[i + 1].second) ? linears[i + 1].second : -1;
    EXPECT_EQ(plan.steps[linears[i].first].prefetch, want) << "linear " << i;
  }
  EXPECT_EQ(plan.steps[linears[3].first].prefetch, -1);  // before the computed weight
  EXPECT_EQ(plan.steps[linears[4].first].prefetch, linears[5].second);
  EXPECT_EQ(plan.steps[linears.back().first].prefetch, -1);  // nothing after the last GEMM
  size_t marked = 0;
  for (const Step& step : plan.steps) {
    if (step.prefetch < 0) continue;
    ++marked;
    EXPECT_TRUE(is_constant(step.prefetch));
  }
  EXPECT_EQ(marked, 4u);
  EXPECT_THAT(plan.explain(), HasSubstr("(prefetches"));

  // Run again, it clears a stale mark first (the last linear prefetches nothing).
  plan.steps[linears.back().first].prefetch = linears[0].second;
  prefetch_as_for_cuda(plan, config);
  EXPECT_EQ(plan.steps[linears.back().first].prefetch, -1);
}

TEST(WeightPrefetch, TheSameWeightTwiceInARowIsNotPrefetched) {
  Tensor square = random_tensor({16, 16}, 5);
  Function twice = [&](std::span<const Tensor> in) {
    return std::vector<Tensor>{ops::linear(ops::linear(in[0], square), square)};
  };
  Compiled compiled = compile(twice, true, "prefetch_twice");
  std::vector<Tensor> inputs{random_tensor({3, 16}, 6)};
  (void)(*compiled.function)(inputs);
  ASSERT_NE(compiled.plan, nullptr);
  CompiledPlan plan = *compiled.plan;
  prefetch_as_for_cuda(plan, CompilationConfig{});
  ASSERT_EQ(linear_steps(plan).size(), 2u);
  for (const Step& step : plan.steps) EXPECT_EQ(step.prefetch, -1);  // it is in cache already
}

// The parts the kernels split a prefetch into: 16-byte aligned and sized, contiguous, covering
// the bytes exactly, for even and uneven splits and more parts than 16-byte units.
TEST(WeightPrefetch, RangesCoverTheBytesInAlignedContiguousParts) {
  for (int64_t bytes : {int64_t{16}, int64_t{4096}, int64_t{295936}, int64_t{8} << 20}) {
    for (int64_t parts : {int64_t{1}, int64_t{3}, int64_t{132}, int64_t{1000}}) {
      int64_t covered = 0;
      for (int64_t part = 0; part < parts; ++part) {
        const gpu::L2PrefetchRange range = gpu::l2_prefetch_range(bytes, part, parts);
        SCOPED_TRACE(fmt::format("{} bytes, part {} of {}", bytes, part, parts));
        EXPECT_EQ(range.begin % 16, 0);
        EXPECT_EQ(range.end % 16, 0);
        EXPECT_EQ(range.begin, covered);  // each part starts where the one before ended
        EXPECT_LE(range.begin, range.end);
        EXPECT_LE(range.end, bytes);
        covered = range.end;
      }
      EXPECT_EQ(covered, bytes) << bytes << " bytes in " << parts << " parts";
    }
  }
}

// ---- GPU

TEST(GpuWeightPrefetch, GemmsAskedToPrefetchGiveTheSameBits) {
  Device gpu;
  if (!first_gpu(&gpu))
    GTEST_SKIP() << "no GPU device available (needs a CUDA or HIP build and a device)";
  const int64_t k = 512, n = 96;
  Tensor weight = random_tensor({n, k}, 7, DType::bf16, gpu);
  // 295936 bytes: not a whole number of 4 KB requests.
  Tensor next = random_tensor({3 * n + 1, k}, 8, DType::bf16, gpu);
  // A weight one element into its buffer: not 16-byte aligned, so the kernels must skip it.
  Tensor buffer = random_tensor({n * k + 1}, 9, DType::bf16, gpu);
  Tensor unaligned = buffer.slice(0, 1, n * k + 1).view({n, k});
  size_t cases = 0;
  for (int64_t rows : {1, 8, 40, 300}) {  // 300: past the skinny kernels, the library's path
    Tensor x = random_tensor({rows, k}, 10, DType::bf16, gpu);
    std::vector<std::string> paths = linear_variants(gpu.type);
    paths.push_back("measured");
    for (const std::string& path : paths) {
      ForceLinearPath forced(path);
      std::vector<Tensor> inputs{x, weight};
      Tensor want = Tensor::empty({rows, n}, DType::bf16, gpu);
      std::vector<Tensor> want_out{want};
      run_kernel("linear", gpu.type, KernelArgs{inputs, Attributes{}, want_out});
      for (const Tensor* prefetch : {&next, &unaligned}) {
        Tensor got = Tensor::empty({rows, n}, DType::bf16, gpu);
        std::vector<Tensor> got_out{got};
        run_kernel("linear", gpu.type, KernelArgs{inputs, Attributes{}, got_out, prefetch});
        EXPECT_EQ(max_abs_difference(got.to(kCPU), want.to(kCPU)), 0.0)
            << rows << " rows, " << path << (prefetch == &unaligned ? ", unaligned" : "");
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 0u);
}

TEST(GpuWeightPrefetch, CompiledCudaPlansCarryTheMarksAndMatchThePlanWithout) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda)
    GTEST_SKIP() << "no CUDA device available (needs a CUDA build and a device)";
  Layers layers;
  for (Tensor* weight : {&layers.first, &layers.second, &layers.third, &layers.fourth})
    *weight = ops::cast(*weight, DType::bf16).to(gpu);
  Compiled with = compile(layers.function, true, "prefetch_gpu_on");
  Compiled without = compile(layers.function, false, "prefetch_gpu_off");
  for (int64_t tokens : {1, 7, 64}) {
    std::vector<Tensor> inputs{random_tensor({tokens, 32}, 11, DType::bf16, gpu)};
    std::vector<Tensor> got = (*with.function)(inputs), want = (*without.function)(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o)
      EXPECT_EQ(max_abs_difference(got[o].to(kCPU), want[o].to(kCPU)), 0.0)
          << tokens << " tokens, output " << o;
  }
  ASSERT_NE(with.plan, nullptr);
  ASSERT_NE(without.plan, nullptr);
  EXPECT_THAT(with.plan->explain(), HasSubstr("(prefetches"));
  EXPECT_THAT(without.plan->explain(), Not(HasSubstr("(prefetches")));
}

}  // namespace
