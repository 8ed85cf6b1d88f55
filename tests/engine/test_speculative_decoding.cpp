// Speculative decoding with prompt lookup (engine.speculative_config, method ngram) on the real
// stories260K model on the CPU: greedy and seeded sampled outputs are token for token the outputs
// without speculation, in eager and compiled mode, for 1, 3 and 5 proposed tokens, with penalties,
// under chunked prefill and under preemption; proposals are really accepted (the metrics count
// them); the config keys and the --speculative-config JSON are checked by name. On a GPU: the same
// with compiled pieces and CUDA graphs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "engine/config.h"
#include "engine/generator.h"
#include "engine/kv_cache_manager.h"
#include "engine/llm_engine.h"
#include "engine/runner/run_setup.h"
#include "engine/scheduler.h"
#include "models/architecture_registry.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "support/error_of.h"
#include "support/runner_steps.h"

using namespace tessera;
using tessera::testing::error_of;
using tessera::testing::greedy;
using ::testing::HasSubstr;

namespace {

const std::string kStories = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";

struct Outcome {
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, FinishReason> reasons;
  EngineMetrics metrics;
};

struct RunSettings {
  CompilationMode mode = CompilationMode::eager;
  int64_t speculative_tokens = 0;  // 0: no speculation
  int64_t blocks = 64;
  int64_t max_num_batched_tokens = 2048;
  int64_t positions = 512;  // max_model_len: the KV cache must hold one sequence of it
  Device device = kCPU;
  std::string graphs = "none";  // compilation.cudagraph_mode on a GPU
};

// Runs every prompt with `params` to the end; their tokens and the engine's metrics.
Outcome run(const RunSettings& setup, const std::vector<std::string>& prompts,
            const SamplingParams& params) {
  std::shared_ptr<const CausalLM> model =
      create_model(load_model(kStories + "/stories260K.bin", LoadOptions{DType::f32, setup.device}),
                   setup.positions);
  auto tokenizer = load_tokenizer(kStories + "/tok512.bin");
  EngineConfig config;
  config.scheduler.max_num_batched_tokens = setup.max_num_batched_tokens;
  config.scheduler.max_num_seqs = 8;
  config.cache.enable_prefix_caching = false;
  if (setup.speculative_tokens > 0) {
    config.speculative.method = "ngram";
    config.speculative.num_speculative_tokens = setup.speculative_tokens;
    config.speculative.prompt_lookup_min = 1;
    config.speculative.prompt_lookup_max = 3;
  }
  RunnerConfig options = tessera::testing::runner_config(setup.mode);
  options.cache.num_kv_blocks = setup.blocks;
  options.scheduler = config.scheduler;
  options.logits_rows_per_sequence = 1 + setup.speculative_tokens;
  if (!setup.device.is_cpu()) {
    options.compilation.cudagraph_mode = parse_enum<CUDAGraphMode>(setup.graphs, "cudagraph_mode");
    if (setup.graphs != "none") options.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16, 32};
  }
  ModelRunner runner(model, options);
  LLMEngine engine(runner, *tokenizer, config);
  for (size_t i = 0; i < prompts.size(); ++i)
    engine.add_request("r" + std::to_string(i), tokenizer->encode(prompts[i], true), params);
  Outcome result;
  for (int step = 0; engine.has_unfinished() && step < 10000; ++step)
    for (const RequestOutput& output : engine.step()) {
      auto& tokens = result.tokens[output.request_id];
      tokens.insert(tokens.end(), output.token_ids.begin(), output.token_ids.end());
      if (output.finished()) result.reasons[output.request_id] = output.finish_reason;
    }
  EXPECT_FALSE(engine.has_unfinished());
  result.metrics = engine.metrics().snapshot();
  return result;
}

// Prompts whose continuations repeat what came before (stories260K retells its stories), so
// that prompt lookup finds proposals the model accepts.
const std::vector<std::string> kPrompts = {
    "Once upon a time, there was a little girl named Lily. Lily liked to play. Once upon a time,",
    "The dog ran and ran. The dog ran and", "Tom had a red ball. Tom had a"};

SamplingParams sampled(int64_t max_tokens) {
  SamplingParams params;
  params.temperature = 0.8;
  params.top_p = 0.9;
  params.top_k = 40;
  params.seed = 1234;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  return params;
}

}  // namespace

TEST(SpeculativeDecoding, GreedyOutputIsTheOutputWithoutSpeculation) {
  for (CompilationMode mode : {CompilationMode::eager, CompilationMode::compiled}) {
    const Outcome plain = run({mode}, kPrompts, greedy(48));
    for (int64_t k : {1, 3, 5}) {
      SCOPED_TRACE(fmt::format("{} mode, {} proposed tokens", enum_name(mode), k));
      const Outcome speculative = run({mode, k}, kPrompts, greedy(48));
      EXPECT_EQ(speculative.tokens, plain.tokens);
      EXPECT_EQ(speculative.reasons, plain.reasons);
      // Proposals were made and some were accepted: the test checks speculation, not its absence.
      EXPECT_GT(speculative.metrics.spec_decode_drafts, 0);
      EXPECT_GT(speculative.metrics.spec_decode_accepted_tokens, 0);
      EXPECT_LE(speculative.metrics.spec_decode_accepted_tokens,
                speculative.metrics.spec_decode_draft_tokens);
      EXPECT_LE(speculative.metrics.spec_decode_draft_tokens,
                k * speculative.metrics.spec_decode_drafts);
      EXPECT_EQ(speculative.metrics.generation_tokens, plain.metrics.generation_tokens);
    }
  }
}

// Each row is drawn with the request's seed and its output index, the proposal before it counted
// as output: a seeded request draws the same tokens with and without speculation, penalties too.
TEST(SpeculativeDecoding, SeededSamplingIsTheOutputWithoutSpeculation) {
  SamplingParams penalized = sampled(40);
  penalized.repetition_penalty = 1.1;
  penalized.presence_penalty = 0.2;
  for (const SamplingParams& params : {sampled(40), penalized}) {
    const Outcome plain = run({}, kPrompts, params);
    const Outcome speculative = run({CompilationMode::eager, 3}, kPrompts, params);
    EXPECT_EQ(speculative.tokens, plain.tokens);
    EXPECT_GT(speculative.metrics.spec_decode_drafts, 0);
  }
}

// A budget of 6 tokens a step splits the prompts into chunks and trims proposals; 9 blocks of 16
// tokens (a model length of 128) cannot hold the three requests at once, so some are preempted
// and recomputed.
TEST(SpeculativeDecoding, ChunkedPrefillAndPreemptionKeepTheOutput) {
  const Outcome plain = run({}, kPrompts, greedy(64));
  RunSettings chunked{CompilationMode::eager, 5};
  chunked.max_num_batched_tokens = 6;
  const Outcome small_budget = run(chunked, kPrompts, greedy(64));
  EXPECT_EQ(small_budget.tokens, plain.tokens);
  EXPECT_GT(small_budget.metrics.spec_decode_accepted_tokens, 0);
  RunSettings tight{CompilationMode::eager, 3};
  tight.blocks = 9;
  tight.positions = 128;
  const Outcome preempted = run(tight, kPrompts, greedy(64));
  EXPECT_EQ(preempted.tokens, plain.tokens);
  EXPECT_GT(preempted.metrics.preemptions, 0);
}

// max_tokens and the model's length cut a run of accepted tokens where they fall.
TEST(SpeculativeDecoding, AcceptedTokensStopAtMaxTokens) {
  for (int64_t max_tokens : {1, 2, 7}) {
    const Outcome speculative = run({CompilationMode::eager, 5}, kPrompts, greedy(max_tokens));
    for (const auto& [id, tokens] : speculative.tokens)
      EXPECT_EQ(static_cast<int64_t>(tokens.size()), max_tokens) << id;
  }
}

// The scheduler gives proposals what is left: never another running request's token, never a
// block that would preempt anyone (a proposal is trimmed instead).
namespace {

// `count` requests of a 2-token prompt, prefilled, each with one drawn token to decode next.
std::vector<std::unique_ptr<Request>> decoding_requests(Scheduler& scheduler, int count) {
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < count; ++i) {
    auto r = std::make_unique<Request>();
    r->id = std::to_string(i);
    r->sequence = i;
    r->prompt_ids = r->all_ids = {1, 2};
    r->max_total_tokens = 16;
    scheduler.add(r.get());
    requests.push_back(std::move(r));
  }
  SchedulerOutput prefill = scheduler.schedule();
  EXPECT_EQ(prefill.scheduled.size(), static_cast<size_t>(count));
  for (auto& item : prefill.scheduled) {
    item.request->num_computed_tokens += item.num_new_tokens;
    item.request->all_ids.push_back(3);
  }
  return requests;
}

}  // namespace

TEST(SpeculativeDecoding, ProposalsTakeWhatTheBudgetAndTheBlocksLeave) {
  SchedulerConfig limits;
  limits.max_num_batched_tokens = 8;
  limits.max_num_seqs = 4;
  {
    // Four decodes and a budget of 8: a proposal of 5 first in line gets 8 - 1 - 3 = 4 tokens,
    // so that the three after it still decode; the second proposal gets what is left, nothing.
    KVCacheManager blocks(/*num_blocks=*/8, /*block_size=*/4);
    Scheduler scheduler(limits, blocks);
    auto requests = decoding_requests(scheduler, 4);
    requests[0]->proposal = {4, 5, 6, 7, 8};
    requests[1]->proposal = {4, 5};
    SchedulerOutput step = scheduler.schedule();
    ASSERT_EQ(step.scheduled.size(), 4u);
    EXPECT_EQ(step.scheduled[0].num_new_tokens, 5);
    EXPECT_EQ(requests[0]->proposal.size(), 4u);
    for (size_t i = 1; i < 4; ++i) EXPECT_EQ(step.scheduled[i].num_new_tokens, 1) << i;
    EXPECT_TRUE(requests[1]->proposal.empty());
  }
  {
    // Two requests fill both blocks: a proposal that would need a third is trimmed to the slots
    // its own block has left, and nobody is preempted.
    KVCacheManager blocks(/*num_blocks=*/2, /*block_size=*/4);
    Scheduler scheduler(limits, blocks);
    auto requests = decoding_requests(scheduler, 2);
    requests[0]->proposal = {4, 5, 6, 7, 8};
    SchedulerOutput step = scheduler.schedule();
    EXPECT_TRUE(step.preempted.empty());
    ASSERT_EQ(step.scheduled.size(), 2u);
    EXPECT_EQ(step.scheduled[0].num_new_tokens, 2);  // positions 2 and 3 of its block
    EXPECT_EQ(requests[0]->proposal.size(), 1u);
    EXPECT_EQ(step.scheduled[1].num_new_tokens, 1);
  }
}

// tessera generate's path: the request's speculative config reaches its engine, which reports
// what it verified.
TEST(SpeculativeDecoding, GenerateSpeculatesAndReportsIt) {
  std::shared_ptr<const CausalLM> model =
      create_model(load_model(kStories + "/stories260K.bin", LoadOptions{DType::f32, kCPU}), 512);
  auto tokenizer = load_tokenizer(kStories + "/tok512.bin");
  RunnerConfig options = tessera::testing::runner_config(CompilationMode::eager);
  options.cache.num_kv_blocks = 64;
  options.logits_rows_per_sequence = 4;
  ModelRunner runner(model, options);
  GenerateRequest request{kPrompts[0], greedy(64), {}, {}, {}};
  const GenerationResult plain = generate(runner, *tokenizer, request);
  EXPECT_EQ(plain.drafts, 0);
  request.speculative.method = "ngram";
  request.speculative.num_speculative_tokens = 3;
  const GenerationResult speculative = generate(runner, *tokenizer, request);
  EXPECT_EQ(speculative.output_ids, plain.output_ids);
  EXPECT_EQ(speculative.text, plain.text);
  EXPECT_GT(speculative.drafts, 0);
  EXPECT_GT(speculative.accepted_tokens, 0);
}

TEST(SpeculativeDecoding, ConfigKeysAndTheCommandLineJson) {
  const EngineConfig config = load_run_config(
      "", {R"(engine.speculative_config={"method": "ngram", "num_speculative_tokens": 4,
             "prompt_lookup_max": 3, "disable_by_batch_size": 16})"});
  EXPECT_EQ(config.speculative.method, "ngram");
  EXPECT_EQ(config.speculative.num_speculative_tokens, 4);
  EXPECT_EQ(config.speculative.prompt_lookup_max, 3);
  EXPECT_EQ(config.speculative.disable_by_batch_size, 16);
  EXPECT_THAT(error_of([] {
                load_run_config("", {R"(engine.speculative_config={"method": "draft_model"})"});
              }),
              HasSubstr("engine.speculative_config.method"));
  EXPECT_THAT(error_of([] {
                load_run_config("", {R"(engine.speculative_config={"method": "ngram", "k": 3})"});
              }),
              HasSubstr("unknown key 'engine.speculative_config.k'"));
  EXPECT_THAT(
      error_of([] { load_run_config("", {R"(engine.speculative_config={"method": "ngram"})"}); }),
      HasSubstr("num_speculative_tokens: required"));
  EXPECT_THAT(
      error_of([] { load_run_config("", {"engine.speculative_config.num_speculative_tokens=3"}); }),
      HasSubstr("need a method"));
  EXPECT_THAT(error_of([] {
                load_run_config("", {R"(engine.speculative_config={"method": "ngram",
                    "num_speculative_tokens": 3, "prompt_lookup_min": 4, "prompt_lookup_max": 2})"});
              }),
              HasSubstr("prompt_lookup_min 4 is above prompt_lookup_max 2"));
  // make_runner_config sizes the runner's logits rows for the proposals.
  EngineConfig speculative = config;
  std::shared_ptr<const CausalLM> model =
      create_model(load_model(kStories + "/stories260K.bin", LoadOptions{DType::f32, kCPU}), 512);
  EXPECT_EQ(make_runner_config(speculative, *model).logits_rows_per_sequence, 5);
  // An engine whose runner cannot score the proposals is refused by name.
  auto tokenizer = load_tokenizer(kStories + "/tok512.bin");
  RunnerConfig options = tessera::testing::runner_config(CompilationMode::eager);
  options.cache.num_kv_blocks = 64;
  ModelRunner runner(model, options);
  EXPECT_THAT(error_of([&] { LLMEngine(runner, *tokenizer, speculative); }),
              HasSubstr("num_speculative_tokens 4 needs the model runner to score 5 logits rows"));
}

// On the GPU, compiled, with full and piecewise graphs: a verification step (several tokens of a
// sequence) runs the piecewise graphs at its token count, the steps without proposals the full
// decode graphs; the outputs are those of the same engine without speculation.
TEST(GpuSpeculativeDecoding, GraphsKeepTheOutputWithoutSpeculation) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  for (const std::string& graphs : {std::string("none"), std::string("full_and_piecewise")}) {
    RunSettings plain_settings{CompilationMode::compiled};
    plain_settings.device = gpu;
    plain_settings.graphs = graphs;
    for (const SamplingParams& params : {greedy(48), sampled(40)}) {
      const Outcome plain = run(plain_settings, kPrompts, params);
      for (int64_t k : {1, 3}) {
        SCOPED_TRACE(
            fmt::format("graphs {}, {} proposed, temperature {}", graphs, k, params.temperature));
        RunSettings settings = plain_settings;
        settings.speculative_tokens = k;
        const Outcome speculative = run(settings, kPrompts, params);
        EXPECT_EQ(speculative.tokens, plain.tokens);
        EXPECT_GT(speculative.metrics.spec_decode_accepted_tokens, 0);
      }
    }
  }
}
