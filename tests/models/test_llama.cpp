// The model families' forward: no guard on the token count, eager == traced, KV-cached decoding ==
// prefill, logits equal to transformers' on tiny models it saved (tests/data/hf_tiny, made by
// tests/hf_reference/make_tiny_models.py) in eager and compiled modes (Llama, Mistral, Qwen2/3,
// Gemma 2/3, Mixtral and Qwen3-MoE), and the real stories260K's published greedy text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "compile/trace/tracer.h"
#include "engine/generator.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "runtime/check.h"
#include "support/loader_files.h"
#include "support/runner_steps.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

const std::string kHfTiny = std::string(TESSERA_SOURCE_DIR) + "/tests/data/hf_tiny/";
const std::string kShared = TESSERA_SHARED_DIR;

std::shared_ptr<const CausalLM> load(const std::string& path, DType dtype = DType::f32,
                                     int64_t max_positions = 128) {
  return create_model(load_model(path, LoadOptions{dtype, kCPU}), max_positions);
}

}  // namespace

TEST(Llama, ForwardRecordsNoGuardOnTheTokenCount) {
  for (const char* name : {"synthetic:tiny", "synthetic:qwen3-tiny", "synthetic:qwen2-tiny"}) {
    auto model = load(name);
    std::vector<int64_t> ids{1, 5, 9, 200, 7}, positions{0, 1, 2, 3, 4};
    std::vector<Tensor> inputs{Tensor::from_ints(ids, {5}, DType::i32),
                               Tensor::from_ints(positions, {5}, DType::i32)};
    TraceOptions options;
    options.dynamic_dims = {{0, 0}, {1, 0}};
    TraceResult result = trace(
        [&](std::span<const Tensor> in) {
          return std::vector<Tensor>{model->forward(in[0], in[1])};
        },
        inputs, options);
    EXPECT_TRUE(result.guards.empty()) << name << "\n" << result.str();
    EXPECT_EQ(result.graph.value(result.graph.outputs()[0]).meta.str(),
              fmt::format("f32[s0, {}]", model->config().hidden_size));
  }
}

TEST(Llama, TracedEqualsEagerAndDecodeEqualsPrefill) {
  auto model = load("synthetic:tiny");
  std::vector<int32_t> ids;
  for (int i = 0; i < 23; ++i) ids.push_back((i * 37 + 11) % 500 + 3);
  RunnerConfig eager_options = runner_config(CompilationMode::eager);
  ModelRunner eager(model, with_kv_blocks_for(eager_options, model->max_positions()));
  RunnerConfig traced_options = runner_config(CompilationMode::traced);
  traced_options.compilation.custom_ops = {"none"};
  ModelRunner traced(model, with_kv_blocks_for(traced_options, model->max_positions()));
  auto prefill = logits_by_chunks(eager, ids, {23}).back();
  std::vector<int64_t> ones(23, 1);
  auto decode = logits_by_chunks(eager, ids, ones).back();
  auto chunked = logits_by_chunks(traced, ids, {5, 1, 9, 8});
  std::vector<double> want(prefill.begin(), prefill.end());
  EXPECT_LT(relative_error(decode, want), 1e-5);
  EXPECT_LT(relative_error(chunked.back(), want), 1e-5);
  EXPECT_EQ(traced.compiled()->num_compiles(), 1u);  // one trace serves every token count
}

// In compiled mode the LM head is a compiled function too (what a full CUDA graph captures after
// the forward): its logits equal eager mode's, and a step of more sequences than it was built
// for (engine.max_num_seqs) is refused before anything runs.
TEST(ModelRunner, CompiledLmHeadEqualsEagerAndRefusesStepsPastMaxNumSeqs) {
  auto model = load("synthetic:tiny");
  RunnerConfig options = runner_config(CompilationMode::compiled);
  options.scheduler.max_num_seqs = 2;
  options.scheduler.max_num_batched_tokens = 64;
  options.compilation.cache_dir = tessera::testing::fresh_temp_dir("cache_lm_head");
  ModelRunner compiled(model, with_kv_blocks_for(options, model->max_positions()));
  RunnerConfig eager_options = runner_config(CompilationMode::eager);
  eager_options.scheduler.max_num_seqs = 2;
  ModelRunner eager(model, with_kv_blocks_for(eager_options, model->max_positions()));
  const std::vector<int32_t> ids[] = {{5, 9, 200}, {7}, {11}};
  const std::vector<int32_t> tables[] = {{0}, {1}, {2}};
  std::vector<SequenceInput> batch;
  for (int s = 0; s < 3; ++s) batch.push_back(SequenceInput{ids[s], 0, tables[s]});
  for (ModelRunner* runner : {&compiled, &eager}) {
    try {
      runner->execute(batch);
      ADD_FAILURE() << "a step of 3 sequences ran with max_num_seqs 2";
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr("a step of 3 sequences exceeds engine.max_num_seqs (2)"));
    }
  }
  batch.pop_back();
  const auto got = logits_to_host(compiled.execute(batch));
  const auto want = logits_to_host(eager.execute(batch));
  ASSERT_EQ(got.size(), 2u);
  for (size_t s = 0; s < got.size(); ++s)
    EXPECT_LT(relative_error(got[s], std::vector<double>(want[s].begin(), want[s].end())), 1e-5);
}

class HfTinyModel : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTinyModel, LogitsMatchTransformers) {
  std::string folder = kHfTiny + GetParam();
  auto [ids, reference] = read_hf_tiny_expected(folder);
  auto model = load(folder);
  ModelRunner runner(
      model, with_kv_blocks_for(runner_config(CompilationMode::eager), model->max_positions()));
  // Every position through decode steps after a 1-token prefill, and the whole prompt at once.
  std::vector<int64_t> steps(ids.size(), 1);
  auto decoded = logits_by_chunks(runner, ids, steps);
  double worst = 0;
  for (size_t position = 0; position < ids.size(); ++position)
    worst = std::max(worst, relative_error(decoded[position], reference[position]));
  EXPECT_LT(worst, 1e-4) << GetParam() << ": worst relative error over positions";
  auto prefill = logits_by_chunks(runner, ids, {static_cast<int64_t>(ids.size())});
  EXPECT_LT(relative_error(prefill.back(), reference.back()), 1e-4) << GetParam();
  auto chunked = logits_by_chunks(runner, ids, {7, 13, 20});
  EXPECT_LT(relative_error(chunked.back(), reference.back()), 1e-4) << GetParam();
  std::printf("%s: worst relative error %.2e over %zu positions\n", GetParam().c_str(), worst,
              ids.size());
}

// The same in compiled mode (fused kernels, the graph split at attention), with every custom op
// decomposed so the fuser sees the primitives: the Llama family once, and each Gemma (softcaps and
// sliding windows in compiled graphs).
class HfTinyModelCompiled : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTinyModelCompiled, LogitsMatchTransformers) {
  std::string folder = kHfTiny + GetParam();
  auto [ids, reference] = read_hf_tiny_expected(folder);
  RunnerConfig options = runner_config(CompilationMode::compiled);
  options.scheduler.max_num_batched_tokens = 64;
  options.compilation.cache_dir = tessera::testing::fresh_temp_dir("cache_hf_tiny_" + GetParam());
  options.compilation.custom_ops = {"none"};
  auto model = load(folder);
  ModelRunner runner(model, with_kv_blocks_for(options, model->max_positions()));
  auto chunked = logits_by_chunks(runner, ids, {7, 1, 12, 20});
  const size_t positions[] = {6, 7, 19, 39};  // the last token of each chunk
  for (size_t i = 0; i < chunked.size(); ++i)
    EXPECT_LT(relative_error(chunked[i], reference[positions[i]]), 1e-4)
        << GetParam() << " position " << positions[i];
}

INSTANTIATE_TEST_SUITE_P(Transformers, HfTinyModel,
                         ::testing::Values("llama", "llama3-scaled-tied", "llama-bf16", "mistral",
                                           "mistral-window", "qwen2", "qwen3", "gemma2", "gemma3",
                                           "mixtral", "qwen3-moe", "qwen3-moe-unnormalized"));
INSTANTIATE_TEST_SUITE_P(Transformers, HfTinyModelCompiled,
                         ::testing::Values("qwen3", "gemma2", "gemma3", "mistral-window", "mixtral",
                                           "qwen3-moe"));

TEST(Stories260K, GreedyTextMatchesLlama2cInEveryFormat) {
  std::string dir = kShared + "/models/stories260K";
  struct Case {
    std::string model, tokenizer;
  };
  for (const Case& c :
       {Case{dir + "/stories260K.bin", dir + "/tok512.bin"},
        Case{kShared + "/models/stories260K-hf", kShared + "/models/stories260K-hf"},
        Case{dir + "/stories260K.gguf", dir + "/stories260K.gguf"}}) {
    auto model = load(c.model, DType::f32, 512);
    auto tokenizer = load_tokenizer(c.tokenizer);
    ModelRunner runner(
        model, with_kv_blocks_for(runner_config(CompilationMode::eager), model->max_positions()));
    GenerateRequest request;
    request.sampling.temperature = 0;
    request.sampling.max_tokens = 60;
    GenerationResult result = generate(runner, *tokenizer, request);
    EXPECT_THAT(result.text, StartsWith(kStoriesGreedy)) << c.model;
  }
}
