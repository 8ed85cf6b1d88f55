// Compiled mode: passes, fused row kernels generated as C++ and cached on disk, the piecewise
// runner; compiled == eager on the Llama forward for many token counts, the same stories260K
// text in every mode, explain's pieces, warm starts that compile nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "compile/codegen/kernel_cache.h"
#include "compile/compiled_function.h"
#include "compile/compiler.h"
#include "compile/ops/ops.h"
#include "engine/generator.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "runtime/check.h"
#include "support/compile_options.h"
#include "support/runner_steps.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;

namespace {

CompileOptions compiled_options(const std::string& cache,
                                std::shared_ptr<const CompiledPlan>* plan) {
  return compiled_mode_options(test_compiler_options(cache), {{0, 0}},
                               CustomOpConfig::parse({"none"}, false),
                               [plan](auto p) { *plan = p; });
}

}  // namespace

TEST(Compiler, FusedRowKernelsMatchEager) {
  Tensor weight = random_tensor({48}, 1), gate_up = random_tensor({40, 48}, 2),
         table = random_tensor({48, 48}, 3);
  // norm -> GEMM -> gated activation -> softmax -> a column slice/cat, with a broadcast bias
  auto function = [&](std::span<const Tensor> in) {
    Tensor h = ops::rms_norm(in[0], weight, 1e-5);
    Tensor a = ops::silu_and_mul(ops::linear(h, gate_up));
    Tensor s = ops::softmax(ops::mul_scalar(a, 0.5));
    std::vector<Tensor> parts{ops::slice(s, -1, 10, 20), ops::slice(s, -1, 0, 10)};
    Tensor g = ops::embedding(table, ops::cast(ops::argmax(in[0]), DType::i64));
    return std::vector<Tensor>{ops::cat(parts, -1), ops::add(h, g), ops::max(a, true)};
  };
  std::shared_ptr<const CompiledPlan> plan;
  CompiledFunction compiled(function, compiled_options(fresh_temp_dir("cache_rows"), &plan));
  for (int64_t rows : {1, 5, 17, 64}) {
    std::vector<Tensor> inputs{random_tensor({rows, 48}, static_cast<uint32_t>(rows))};
    std::vector<Tensor> got = compiled(inputs), want = function(inputs);
    for (size_t o = 0; o < want.size(); ++o)
      EXPECT_LT(relative_error(got[o], want[o]), 1e-5) << "rows " << rows << " output " << o;
  }
  EXPECT_EQ(compiled.num_compiles(), 1u);
  ASSERT_NE(plan, nullptr);
  EXPECT_GE(plan->kernels.size(), 2u) << plan->explain();
  std::vector<Tensor> too_many{random_tensor({65, 48}, 9)};
  EXPECT_THROW(compiled(too_many), Error);
}

TEST(Compiler, ChainedReductionsInOneRowKernelMatchEager) {
  // norm -> add -> norm fused into one row kernel (Gemma's post-attention and pre-MLP norms): the
  // second reduction reads the first, and each keeps its own per-row array.
  Tensor first_weight = random_tensor({48}, 4), second_weight = random_tensor({48}, 5);
  auto function = [&](std::span<const Tensor> in) {
    Tensor sum = ops::add(ops::rms_norm(in[0], first_weight, 1e-6), in[0]);
    return std::vector<Tensor>{ops::rms_norm(sum, second_weight, 1e-6)};
  };
  std::shared_ptr<const CompiledPlan> plan;
  CompiledFunction compiled(function, compiled_options(fresh_temp_dir("cache_chained"), &plan));
  for (int64_t rows : {1, 7, 64}) {
    std::vector<Tensor> inputs{random_tensor({rows, 48}, static_cast<uint32_t>(rows))};
    EXPECT_LT(relative_error(compiled(inputs)[0], function(inputs)[0]), 1e-5) << rows << " rows";
  }
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->kernels.size(), 1u) << plan->explain();
}

TEST(Compiler, LlamaCompiledEqualsEagerForManyTokenCounts) {
  auto model =
      std::shared_ptr<const CausalLM>(create_model(load_model("synthetic:qwen3-tiny", {}), 256));
  RunnerConfig eager_options = runner_config(CompilationMode::eager);
  ModelRunner eager(model, with_kv_blocks_for(eager_options, model->max_positions()));
  RunnerConfig compiled_options;
  compiled_options.compilation.mode = CompilationMode::compiled;
  compiled_options.compilation.cache_dir = fresh_temp_dir("cache_llama");
  compiled_options.scheduler.max_num_batched_tokens = 64;
  compiled_options.compilation.custom_ops = {"none"};  // everything fuses
  ModelRunner compiled(model, with_kv_blocks_for(compiled_options, model->max_positions()));
  for (int64_t tokens = 1; tokens <= 64; ++tokens) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < tokens; ++i)
      ids.push_back(static_cast<int32_t>((i * 131 + tokens) % 500 + 3));
    std::vector<float> want = logits_by_chunks(eager, ids, {tokens}).back(),
                       got = logits_by_chunks(compiled, ids, {tokens}).back();
    double diff = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i)
      diff += (got[i] - want[i]) * (got[i] - want[i]), norm += want[i] * want[i];
    EXPECT_LT(std::sqrt(diff / norm), 1e-5) << tokens << " tokens";
  }
  EXPECT_EQ(compiled.compiled()->num_compiles(), 1u);
}

TEST(Compiler, Stories260KTextIsIdenticalInEveryModeAndExplainShowsThePieces) {
  std::string dir = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";
  auto tokenizer = load_tokenizer(dir + "/tok512.bin");
  auto model =
      std::shared_ptr<const CausalLM>(create_model(load_model(dir + "/stories260K.bin", {}), 512));
  std::string cache = fresh_temp_dir("cache_stories");
  std::map<std::string, std::string> texts;
  std::shared_ptr<const CompiledPlan> plan;
  for (const char* mode : {"eager", "traced", "compiled"}) {
    RunnerConfig options;  // the mode's default custom ops
    options.compilation.mode = parse_enum<CompilationMode>(mode, "mode");
    options.compilation.cache_dir = cache;
    ModelRunner runner(model, with_kv_blocks_for(options, model->max_positions()));
    GenerateRequest request;
    request.sampling.temperature = 0;
    request.sampling.max_tokens = 80;
    texts[mode] = generate(runner, *tokenizer, request).text;
    if (runner.latest_plan()) plan = runner.latest_plan();
  }
  EXPECT_THAT(texts["eager"],
              ::testing::StartsWith("Once upon a time, there was a little girl named Lily."));
  EXPECT_EQ(texts["traced"], texts["eager"]);
  EXPECT_EQ(texts["compiled"], texts["eager"]);
  ASSERT_NE(plan, nullptr);
  std::string explain = plan->explain();
  EXPECT_THAT(explain, HasSubstr("6 pieces, 5 splitting ops (rotary_attention)")) << explain;
  EXPECT_THAT(explain, HasSubstr("unique pieces: 3 of 6")) << explain;
  std::printf("%s", explain.c_str());
}

TEST(Compiler, WarmStartCompilesNothingAndCorruptEntriesAreRebuilt) {
  std::string cache = fresh_temp_dir("cache_warm");
  auto function = [](std::span<const Tensor> in) {
    return std::vector<Tensor>{ops::softmax(ops::add_scalar(ops::mul(in[0], in[0]), 0.25))};
  };
  Graph graph = trace(function, std::vector<Tensor>{random_tensor({4, 8}, 1)}, {}).graph;
  CompilerOptions options;
  options.config.cache_dir = cache;
  auto cold = compile_graph(graph, options);
  EXPECT_EQ(cold->kernels_compiled, 1u);
  // A new process would find the entry on disk; this one shares the loaded object. Either way
  // nothing is compiled again.
  auto warm = compile_graph(graph, options);
  EXPECT_EQ(warm->kernels_compiled, 0u);
  EXPECT_EQ(warm->kernels_from_cache, 1u);
  // An entry on disk that does not load (truncated, overwritten) is rebuilt, not trusted.
  CpuKernelCache fresh(cache);
  std::string source =
      "#include <cstdint>\nextern \"C\" void tessera_kernel(int64_t, int64_t, void* const*) {}\n";
  std::string key =
      fmt::format("{:016x}", fnv1a_hash(CpuKernelCache::compiler_identity() + "\n" + source));
  std::ofstream(std::filesystem::path(fresh.directory()) / (key + ".so")) << "not an ELF file";
  EXPECT_NE(fresh.load(source, "empty"), nullptr);
  EXPECT_EQ(fresh.stats().rebuilt, 1u);
  EXPECT_EQ(fresh.stats().compiled, 1u);
}

TEST(Compiler, CompilerErrorsNameTheSource) {
  CpuKernelCache cache(fresh_temp_dir("cache_broken"));
  try {
    cache.load("this is not C++", "broken_kernel");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("broken_kernel"));
    EXPECT_THAT(error.what(), HasSubstr(".cpp"));
    EXPECT_THAT(error.what(), HasSubstr("error"));
  }
}
