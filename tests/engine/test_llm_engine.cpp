// The engine with the real stories260K model on the CPU: continuous batching under both budgets,
// chunked prefill equal to one-shot prefill, preemption that keeps outputs exact, prefix-cache
// hits with exact outputs, abort freeing blocks, seeded sampling independent of the batch, stop
// strings across token boundaries, and refusal at admission of what cannot fit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "engine/llm_engine.h"
#include "engine/runner/run_setup.h"
#include "engine/structured_output/grammar_compiler.h"
#include "models/architecture_registry.h"
#include "runtime/check.h"
#include "support/error_of.h"
#include "support/forwarding_executor.h"
#include "support/runner_steps.h"

using namespace tessera;
using tessera::testing::greedy;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

const std::string kStories = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";

struct StoriesEngineParts {
  std::shared_ptr<const CausalLM> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ModelRunner> runner;
};

// stories260K (512 positions) in eager mode with `blocks` KV blocks of 16 tokens.
StoriesEngineParts setup(int64_t blocks, int64_t max_num_batched_tokens = 2048,
                         int64_t positions = 512) {
  StoriesEngineParts s;
  s.model = create_model(load_model(kStories + "/stories260K.bin", LoadOptions{DType::f32, kCPU}),
                         positions);
  s.tokenizer = load_tokenizer(kStories + "/tok512.bin");
  RunnerConfig options = tessera::testing::runner_config(CompilationMode::eager);
  options.cache.num_kv_blocks = blocks;
  options.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  s.runner = std::make_unique<ModelRunner>(s.model, options);
  return s;
}

EngineConfig engine_options(int64_t max_num_seqs = 64, int64_t max_num_batched_tokens = 2048,
                            bool prefix_caching = true) {
  EngineConfig options;
  options.scheduler.max_num_seqs = max_num_seqs;
  options.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  options.cache.enable_prefix_caching = prefix_caching;
  return options;
}

struct Finished {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::none;
  std::string stop_reason;
  int64_t cached_tokens = 0;
};

// Steps until every request finished; each request's tokens, text and finish.
std::map<std::string, Finished> run_all(LLMEngine& engine, int max_steps = 100000) {
  std::map<std::string, Finished> results;
  for (int step = 0; engine.has_unfinished() && step < max_steps; ++step) {
    for (const RequestOutput& output : engine.step()) {
      Finished& f = results[output.request_id];
      f.tokens.insert(f.tokens.end(), output.token_ids.begin(), output.token_ids.end());
      f.text += output.text;
      if (output.finished()) {
        f.reason = output.finish_reason;
        f.stop_reason = output.stop_reason;
        f.cached_tokens = output.cached_tokens;
      }
    }
  }
  EXPECT_FALSE(engine.has_unfinished()) << "requests left after " << max_steps << " steps";
  return results;
}

std::vector<int32_t> prompt_of(const Tokenizer& tokenizer, const std::string& text) {
  return tokenizer.encode(text, true);
}

// What each prompt gets alone, greedy.
std::vector<int32_t> alone(const std::string& text, int64_t max_tokens) {
  StoriesEngineParts s = setup(64);
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options(1, 2048, false));
  engine.add_request("alone", prompt_of(*s.tokenizer, text), greedy(max_tokens));
  return run_all(engine)["alone"].tokens;
}

const std::vector<std::string> kPrompts = {
    "Once upon a time", "The little dog ran to the park and", "Lily and Ben",
    "One day, a big bird flew over the house. It was", "Tom"};

}  // namespace

TEST(Scheduler, DecodesFirstThenPrefillsUnderBothBudgets) {
  KVCacheManager blocks(64, 4);
  SchedulerConfig limits;
  limits.max_num_batched_tokens = 10;
  limits.max_num_seqs = 2;
  Scheduler scheduler(limits, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  for (int i = 0; i < 3; ++i) {
    auto r = std::make_unique<Request>();
    r->id = std::to_string(i);
    r->sequence = i;
    r->prompt_ids = r->all_ids = std::vector<int32_t>(7, 1);
    r->max_total_tokens = 100;
    scheduler.add(r.get());
    requests.push_back(std::move(r));
  }
  SchedulerOutput first = scheduler.schedule();
  ASSERT_EQ(first.scheduled.size(), 2u);  // the token budget splits the second prompt
  EXPECT_EQ(first.scheduled[0].num_new_tokens, 7);
  EXPECT_EQ(first.scheduled[1].num_new_tokens, 3);  // a chunk: 10 - 7
  EXPECT_EQ(first.num_batched_tokens, 10);
  for (auto& item : first.scheduled) item.request->num_computed_tokens += item.num_new_tokens;
  requests[0]->all_ids.push_back(5);  // request 0 sampled a token: now it decodes
  SchedulerOutput second = scheduler.schedule();
  ASSERT_EQ(second.scheduled.size(), 2u);  // max_num_seqs = 2: request 2 keeps waiting
  EXPECT_EQ(second.scheduled[0].request, requests[0].get());  // the decode comes first
  EXPECT_EQ(second.scheduled[0].num_new_tokens, 1);
  EXPECT_EQ(second.scheduled[1].num_new_tokens, 4);  // the rest of request 1's prompt
  EXPECT_EQ(scheduler.num_waiting(), 1u);
}

// A request of `prompt_length` tokens for the scheduler alone.
std::unique_ptr<Request> scheduler_request(int64_t sequence, int64_t priority,
                                           int64_t prompt_length = 4) {
  auto request = std::make_unique<Request>();
  request->id = std::to_string(sequence);
  request->sequence = sequence;
  request->priority = priority;
  request->prompt_ids = request->all_ids = std::vector<int32_t>(prompt_length, 1);
  request->max_total_tokens = 100;
  return request;
}

std::vector<std::string> ids_of(const SchedulerOutput& output) {
  std::vector<std::string> ids;
  for (const ScheduledRequest& item : output.scheduled) ids.push_back(item.request->id);
  return ids;
}

// The step ran: its tokens are in the cache, and each request whose prompt is done drew one.
void computed(SchedulerOutput& output) {
  for (auto& item : output.scheduled) {
    Request& request = *item.request;
    request.num_computed_tokens += item.num_new_tokens;
    if (request.num_computed_tokens == request.num_tokens()) request.all_ids.push_back(7);
  }
}

// Issue 36: under the priority policy the waiting queue runs in (priority, arrival) order, and a
// waiting request preempts running ones of a lower priority (higher value), the latest first.
TEST(Scheduler, ThePriorityPolicyRunsLowerValuesFirstAndPreemptsForThem) {
  KVCacheManager blocks(64, 4);
  SchedulerConfig limits;
  limits.max_num_seqs = 2;
  limits.policy = SchedulingPolicy::priority;
  Scheduler scheduler(limits, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  for (int64_t priority : {5, 5, 1}) {
    requests.push_back(scheduler_request(static_cast<int64_t>(requests.size()), priority));
    scheduler.add(requests.back().get());
  }
  SchedulerOutput first = scheduler.schedule();
  EXPECT_EQ(ids_of(first), (std::vector<std::string>{"2", "0"}));  // priority 1, then arrival
  computed(first);
  // A new request of priority 0 finds both slots taken: the latest of the lowest priority (5)
  // makes room for it; one of equal priority would wait.
  requests.push_back(scheduler_request(3, 0));
  scheduler.add(requests.back().get());
  requests.push_back(scheduler_request(4, 1));
  scheduler.add(requests.back().get());
  SchedulerOutput second = scheduler.schedule();
  ASSERT_EQ(second.preempted.size(), 1u);
  EXPECT_EQ(second.preempted[0]->id, "0");
  EXPECT_EQ(ids_of(second), (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(scheduler.num_waiting(), 3u);  // 4 (priority 1) waits: nothing lower is running
  computed(second);
  SchedulerOutput third = scheduler.schedule();
  EXPECT_TRUE(third.preempted.empty());
  EXPECT_EQ(ids_of(third), (std::vector<std::string>{"3", "2"}));  // running, in priority order
}

// Under first come, first served the same arrivals run in arrival order and nothing is preempted
// for a waiting request.
TEST(Scheduler, FirstComeFirstServedIgnoresNoOneAndPreemptsForNoOne) {
  KVCacheManager blocks(64, 4);
  SchedulerConfig limits;
  limits.max_num_seqs = 2;
  Scheduler scheduler(limits, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  for (int64_t i = 0; i < 4; ++i) {
    requests.push_back(scheduler_request(i, 0));
    scheduler.add(requests.back().get());
  }
  SchedulerOutput first = scheduler.schedule();
  EXPECT_EQ(ids_of(first), (std::vector<std::string>{"0", "1"}));
  computed(first);
  SchedulerOutput second = scheduler.schedule();
  EXPECT_TRUE(second.preempted.empty());
  EXPECT_EQ(ids_of(second), (std::vector<std::string>{"0", "1"}));
}

// When the KV cache runs out, the priority policy preempts the running request of the lowest
// priority, not the most recently admitted one.
TEST(Scheduler, OutOfBlocksThePriorityPolicyPreemptsTheLowestPriority) {
  KVCacheManager blocks(4, 4);  // 16 tokens
  SchedulerConfig limits;
  limits.policy = SchedulingPolicy::priority;
  Scheduler scheduler(limits, blocks);
  std::vector<std::unique_ptr<Request>> requests;
  requests.push_back(scheduler_request(0, 9, 8));  // low priority, admitted first
  requests.push_back(scheduler_request(1, 0, 8));
  for (auto& request : requests) scheduler.add(request.get());
  SchedulerOutput first = scheduler.schedule();
  EXPECT_EQ(ids_of(first), (std::vector<std::string>{"1", "0"}));
  computed(first);
  requests[1]->all_ids.push_back(5);  // request 1 needs a fifth block: there is none
  requests[0]->all_ids.push_back(5);
  SchedulerOutput second = scheduler.schedule();
  ASSERT_EQ(second.preempted.size(), 1u);
  EXPECT_EQ(second.preempted[0]->id, "0");
  EXPECT_EQ(ids_of(second), (std::vector<std::string>{"1"}));
}

TEST(KVCacheManager, PrefixCachingSharesFullBlocksOfACommonPrefix) {
  KVCacheManager blocks(8, 4, /*enable_prefix_caching=*/true);
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(blocks.allocate_prompt(0, prompt, 10), 0);  // nothing cached yet
  blocks.cache_blocks(0, prompt, 10);                   // two full blocks are now known
  std::vector<int32_t> same_start = {1, 2, 3, 4, 5, 6, 7, 8, 42};
  EXPECT_EQ(blocks.cached_prefix_tokens(same_start), 8);
  EXPECT_EQ(blocks.allocate_prompt(1, same_start, 9), 8);
  EXPECT_EQ(blocks.block_table(1)[0], blocks.block_table(0)[0]);  // shared, not copied
  EXPECT_EQ(blocks.reference_count(blocks.block_table(0)[1]), 2);
  // A prompt that differs inside the first block shares nothing.
  EXPECT_EQ(blocks.cached_prefix_tokens(std::vector<int32_t>{1, 2, 3, 9, 9}), 0);
  // Exactly a cached prefix: the last token must still be computed, so one block less.
  EXPECT_EQ(blocks.cached_prefix_tokens(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}), 4);
  blocks.free(0);
  blocks.free(1);
  EXPECT_EQ(blocks.num_free(), 8);  // free, yet still cached
  EXPECT_EQ(blocks.cached_prefix_tokens(same_start), 8);
  EXPECT_EQ(blocks.prefix_hit_tokens(), 8);
  EXPECT_EQ(blocks.prefix_query_tokens(), 19);
  // Handing out every block evicts the cached ones, least recently freed first.
  blocks.allocate(9, 32);
  EXPECT_EQ(blocks.cached_prefix_tokens(same_start), 0);
}

TEST(LLMEngine, BatchedGreedyOutputsEqualEachPromptAlone) {
  StoriesEngineParts s = setup(256);
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options(3, 24));  // both budgets bind
  for (size_t i = 0; i < kPrompts.size(); ++i)
    engine.add_request("r" + std::to_string(i), prompt_of(*s.tokenizer, kPrompts[i]),
                       greedy(20 + 5 * static_cast<int64_t>(i)));
  auto results = run_all(engine);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const Finished& f = results["r" + std::to_string(i)];
    EXPECT_EQ(f.tokens, alone(kPrompts[i], 20 + 5 * static_cast<int64_t>(i))) << kPrompts[i];
    EXPECT_EQ(f.reason, FinishReason::length);
  }
  EXPECT_EQ(engine.kv_cache().num_free(), engine.kv_cache().num_blocks());
}

TEST(LLMEngine, ChunkedPrefillEqualsOneShotPrefill) {
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. One day, she saw a big, red ball.";
  StoriesEngineParts chunked = setup(64, 2048);
  LLMEngine engine(*chunked.runner, *chunked.tokenizer, engine_options(4, 5));  // 5-token chunks
  engine.add_request("chunked", prompt_of(*chunked.tokenizer, prompt), greedy(30));
  EXPECT_EQ(run_all(engine)["chunked"].tokens, alone(prompt, 30));
}

TEST(LLMEngine, PreemptionByRecomputeKeepsOutputsExact) {
  // 12 blocks of 16 tokens: four sequences growing to ~70 tokens each cannot all stay.
  StoriesEngineParts s = setup(12, 2048, 128);
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options(4, 2048, false));
  for (size_t i = 0; i < 4; ++i)
    engine.add_request("r" + std::to_string(i), prompt_of(*s.tokenizer, kPrompts[i]), greedy(50));
  auto results = run_all(engine);
  EXPECT_GT(engine.metrics().snapshot().preemptions, 0) << "the test must preempt";
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(results["r" + std::to_string(i)].tokens, alone(kPrompts[i], 50)) << kPrompts[i];
  EXPECT_EQ(engine.kv_cache().num_free(), 12);
}

TEST(LLMEngine, PrefixCacheHitsSkipPrefillAndKeepOutputsExact) {
  const std::string shared =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park.";
  StoriesEngineParts s = setup(64);
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options());
  engine.add_request("first", prompt_of(*s.tokenizer, shared + " One day"), greedy(20));
  auto first = run_all(engine);
  engine.add_request("second", prompt_of(*s.tokenizer, shared + " Her mom"), greedy(20));
  auto second = run_all(engine);
  EXPECT_EQ(first["first"].cached_tokens, 0);
  EXPECT_GE(second["second"].cached_tokens, 16);
  EXPECT_EQ(second["second"].tokens, alone(shared + " Her mom", 20));
  EngineMetrics metrics = engine.metrics().snapshot();
  EXPECT_GT(metrics.prefix_cache_hit_rate(), 0.0);
  EXPECT_EQ(metrics.prefix_cache_hits, second["second"].cached_tokens);
}

TEST(LLMEngine, AbortFinishesTheRequestAndFreesItsBlocks) {
  StoriesEngineParts s = setup(64);
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options());
  auto stream = engine.add_request("a", prompt_of(*s.tokenizer, kPrompts[1]), greedy(200));
  engine.add_request("b", prompt_of(*s.tokenizer, kPrompts[0]), greedy(10));
  engine.step();
  engine.step();
  EXPECT_LT(engine.kv_cache().num_free(), 64);
  engine.abort("a");
  std::optional<RequestOutput> last;
  while (auto output = stream->pop(std::chrono::milliseconds(0))) last = output;
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->finish_reason, FinishReason::abort);
  auto rest = run_all(engine);  // the other request is not disturbed
  EXPECT_EQ(rest["b"].reason, FinishReason::length);
  EXPECT_EQ(engine.kv_cache().num_free(), 64);
  engine.abort("unknown");  // no-op
}

TEST(LLMEngine, SeededSamplingIsReproducibleWhateverTheBatch) {
  SamplingParams seeded;
  seeded.temperature = 1.0;
  seeded.top_p = 0.9;
  seeded.seed = 77;
  seeded.max_tokens = 25;
  StoriesEngineParts s = setup(256);
  std::vector<int32_t> solo;
  {
    LLMEngine engine(*s.runner, *s.tokenizer, engine_options());
    engine.add_request("seeded", prompt_of(*s.tokenizer, kPrompts[0]), seeded);
    solo = run_all(engine)["seeded"].tokens;
  }
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options());
  SamplingParams noisy;
  noisy.temperature = 0.8;
  noisy.max_tokens = 30;
  engine.add_request("other0", prompt_of(*s.tokenizer, kPrompts[1]), noisy);
  engine.add_request("seeded", prompt_of(*s.tokenizer, kPrompts[0]), seeded);
  engine.add_request("other1", prompt_of(*s.tokenizer, kPrompts[2]), noisy);
  auto results = run_all(engine);
  EXPECT_EQ(results["seeded"].tokens, solo);
  SamplingParams other_seed = seeded;
  other_seed.seed = 78;
  engine.add_request("other-seed", prompt_of(*s.tokenizer, kPrompts[0]), other_seed);
  EXPECT_NE(run_all(engine)["other-seed"].tokens, solo);
}

TEST(LLMEngine, StopStringsAreFoundAcrossTokensAndNotShown) {
  StoriesEngineParts s = setup(64);
  // The greedy text, then a stop string that starts inside one token and ends in another.
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options());
  engine.add_request("plain", prompt_of(*s.tokenizer, "Once upon a time"), greedy(40));
  Finished plain = run_all(engine)["plain"];
  // Where each token's text begins in the output text.
  std::vector<int32_t> prompt = prompt_of(*s.tokenizer, "Once upon a time");
  const size_t prompt_text = s.tokenizer->decode(prompt, true).size();
  std::string stop;
  size_t start = 0;
  for (size_t k = 1; k + 1 < plain.tokens.size() && stop.empty(); ++k) {
    std::vector<int32_t> ids = prompt;
    ids.insert(ids.end(), plain.tokens.begin(), plain.tokens.begin() + static_cast<long>(k));
    size_t boundary = s.tokenizer->decode(ids, true).size() - prompt_text;
    if (boundary < 1 || boundary + 2 > plain.text.size()) continue;
    std::string candidate = plain.text.substr(boundary - 1, 3);  // one character before, two after
    if (plain.text.find(candidate) == boundary - 1) {
      stop = candidate;
      start = boundary - 1;
    }
  }
  ASSERT_FALSE(stop.empty()) << "no stop string spans a token boundary in: " << plain.text;
  SamplingParams with_stop = greedy(40);
  with_stop.stop = {stop};
  engine.add_request("stopped", prompt_of(*s.tokenizer, "Once upon a time"), with_stop);
  Finished stopped = run_all(engine)["stopped"];
  EXPECT_EQ(stopped.reason, FinishReason::stop);
  EXPECT_EQ(stopped.stop_reason, stop);
  EXPECT_EQ(stopped.text, plain.text.substr(0, start));
}

TEST(LLMEngine, WhatCannotFitIsRefusedAtAdmission) {
  StoriesEngineParts s = setup(64);
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options());
  auto error_of = [&](std::vector<int32_t> prompt, SamplingParams params) {
    try {
      engine.add_request("x", std::move(prompt), params);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_THAT(error_of(std::vector<int32_t>(512, 5), greedy(1)), HasSubstr("maximum context"));
  EXPECT_THAT(error_of(std::vector<int32_t>(500, 5), greedy(20)), HasSubstr("max_tokens"));
  EXPECT_THAT(error_of({}, greedy(1)), HasSubstr("prompt"));
  EXPECT_THAT(error_of({1, 512}, greedy(1)), HasSubstr("vocabulary"));
  EXPECT_FALSE(engine.has_unfinished());
  // A KV cache smaller than one sequence of max_model_len is a startup error.
  StoriesEngineParts small = setup(8);
  EXPECT_THROW(LLMEngine(*small.runner, *small.tokenizer, engine_options()), Error);
}

// The scheduler's budgets are the config's the engine is given, with no second default on the
// way; past the runner's budget (its plans are sized for it) they are an error naming the keys.
TEST(LLMEngine, SchedulerBudgetsComeFromTheConfig) {
  StoriesEngineParts s = setup(64, 48);
  EngineConfig config = engine_options(3, 40, false);
  LLMEngine engine(*s.runner, *s.tokenizer, config);
  EXPECT_EQ(engine.scheduler().config().max_num_batched_tokens, 40);
  EXPECT_EQ(engine.scheduler().config().max_num_seqs, 3);
  EXPECT_EQ(engine.scheduler().config().async_scheduling, config.scheduler.async_scheduling);
  for (int i = 0; i < 4; ++i)
    engine.add_request(std::to_string(i), std::vector<int32_t>(30, 5), greedy(2));
  const std::vector<RequestOutput> first = engine.step();
  EXPECT_EQ(engine.scheduler().num_running(), 2u);  // 30 + 10 of the 40-token budget
  EXPECT_THAT(tessera::testing::error_of(
                  [&] { LLMEngine(*s.runner, *s.tokenizer, engine_options(3, 64)); }),
              AllOf(HasSubstr("engine.max_num_batched_tokens 64"), HasSubstr("runner's (48, 64)")));
  EXPECT_THAT(tessera::testing::error_of(
                  [&] { LLMEngine(*s.runner, *s.tokenizer, engine_options(65, 48)); }),
              HasSubstr("engine.max_num_seqs 65"));
}

namespace {

// Counts what the engine asks of the runner: forward calls, and new tokens it named by their row
// in the previous step's draws (asynchronous scheduling's hand-over on the device).
class CountingExecutor final : public tessera::testing::ForwardingExecutor {
 public:
  using ForwardingExecutor::ForwardingExecutor;
  using ModelExecutor::execute;
  Tensor execute(std::span<const SequenceInput> batch, const Tensor& sampled_ids) override {
    ++calls;
    for (const SequenceInput& sequence : batch) taken_on_device += sequence.sampled_row >= 0;
    return inner_.execute(batch, sampled_ids);
  }

  int64_t calls = 0;
  int64_t taken_on_device = 0;
};

}  // namespace

// Every request gets what it gets with the host in step: greedy, seeded sampling, end tokens,
// penalties, logprobs and stop strings, under chunked prefill and preemption.
TEST(LLMEngine, AsynchronousSchedulingGivesWhatSynchronousGives) {
  std::map<bool, std::map<std::string, Finished>> results;
  for (bool async : {false, true}) {
    StoriesEngineParts s = setup(12, 2048, 128);  // 12 blocks of 16: preemption
    CountingExecutor counting(*s.runner);
    EngineConfig options = engine_options(4, 24);
    options.scheduler.async_scheduling = async;
    LLMEngine engine(counting, *s.tokenizer, options);
    auto add = [&](const std::string& id, size_t prompt, SamplingParams params) {
      engine.add_request(id, prompt_of(*s.tokenizer, kPrompts[prompt]), params);
    };
    add("greedy", 0, greedy(60));
    SamplingParams until_end = greedy(90);
    until_end.ignore_eos = false;
    add("until-end", 1, until_end);
    SamplingParams seeded;
    seeded.temperature = 1.0;
    seeded.top_p = 0.9;
    seeded.seed = 5;
    seeded.max_tokens = 70;
    add("seeded", 2, seeded);
    SamplingParams penalized = greedy(50);
    penalized.presence_penalty = 0.5;
    penalized.frequency_penalty = 0.3;
    add("penalized", 3, penalized);
    SamplingParams with_logprobs = greedy(40);
    with_logprobs.logprobs = 3;
    add("logprobs", 4, with_logprobs);
    SamplingParams stopped = greedy(60);
    stopped.stop = {" the"};
    add("stop", 0, stopped);
    results[async] = run_all(engine);
    EXPECT_GT(engine.metrics().snapshot().preemptions, 0) << "the test must preempt";
    EXPECT_EQ(engine.kv_cache().num_free(), 12);
    if (async) {
      EXPECT_GT(counting.taken_on_device, 0) << "no step took a token still in flight";
    } else {
      EXPECT_EQ(counting.taken_on_device, 0);
    }
  }
  ASSERT_EQ(results[true].size(), 6u);
  for (const auto& [id, expected] : results[false]) {
    const Finished& got = results[true][id];
    EXPECT_EQ(got.tokens, expected.tokens) << id;
    EXPECT_EQ(got.text, expected.text) << id;
    EXPECT_EQ(got.reason, expected.reason) << id;
    EXPECT_EQ(got.stop_reason, expected.stop_reason) << id;
  }
  EXPECT_EQ(results[false]["stop"].reason, FinishReason::stop);
}

// A request's last token (max_tokens) is known to be the last before it is drawn: no step runs
// past it, in either mode.
TEST(LLMEngine, NoStepRunsPastMaxTokens) {
  for (bool async : {false, true}) {
    StoriesEngineParts s = setup(64);
    CountingExecutor counting(*s.runner);
    EngineConfig options = engine_options();
    options.scheduler.async_scheduling = async;
    LLMEngine engine(counting, *s.tokenizer, options);
    engine.add_request("ten", prompt_of(*s.tokenizer, kPrompts[0]), greedy(10));
    EXPECT_EQ(run_all(engine)["ten"].tokens.size(), 10u);
    EXPECT_EQ(counting.calls, 10) << "async " << async;  // the prefill and nine decode steps
    EXPECT_EQ(engine.kv_cache().num_free(), 64);
  }
}

// After a fault every request fails, the step in flight is dropped, and the engine serves the next
// requests as before.
TEST(LLMEngine, FailAllDropsTheStepInFlightAndTheEngineGoesOn) {
  StoriesEngineParts s = setup(64);
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options());
  auto stream = engine.add_request("a", prompt_of(*s.tokenizer, kPrompts[0]), greedy(30));
  engine.step();
  engine.step();  // a step is in flight now
  engine.fail_all("device fault");
  std::optional<RequestOutput> last;
  while (auto output = stream->pop(std::chrono::milliseconds(0))) last = output;
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->finish_reason, FinishReason::error);
  EXPECT_EQ(last->error, "device fault");
  EXPECT_FALSE(engine.has_unfinished());
  EXPECT_EQ(engine.kv_cache().num_free(), 64);
  engine.add_request("b", prompt_of(*s.tokenizer, kPrompts[2]), greedy(20));
  EXPECT_EQ(run_all(engine)["b"].tokens, alone(kPrompts[2], 20));
}

// A sequence that names a row of the previous step's draws gets a clear error when there are none
// or the row is not there, and the runner goes on.
TEST(ModelRunner, ARowOfDrawsThatIsNotThereIsAClearError) {
  StoriesEngineParts s = setup(64);
  KVCacheManager blocks(64, 16);
  blocks.allocate(0, 4);
  const std::vector<int32_t> prompt = {1, 2, 3};
  SequenceInput first{prompt, 0, blocks.block_table(0)};
  Tensor logits = s.runner->execute(std::span(&first, 1));
  const int32_t placeholder = 0;
  SequenceInput next{std::span(&placeholder, 1), 3, blocks.block_table(0), 1};
  auto error_of = [&](const Tensor& draws) {
    try {
      s.runner->execute(std::span(&next, 1), draws);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_THAT(error_of(Tensor()), HasSubstr("were not given"));
  const std::vector<int64_t> one_draw{7};
  EXPECT_THAT(error_of(Tensor::from_ints(one_draw, {1}, DType::i32)),
              HasSubstr("do not hold that row"));
  next.sampled_row = 0;  // the row that is there
  EXPECT_EQ(error_of(Tensor::from_ints(one_draw, {1}, DType::i32)), "");
}

// Issue 36, item 10: stories260K writes "\n<s>\n" between stories. Logprobs list exactly the
// tokens whose text is in the output, each at the character where it starts, so the listed
// texts put together are the text; <s> and the end token are not among them, and the token after
// <s> is shown as it reads there ("Once", its space dropped).
TEST(LLMEngine, LogprobsListExactlyTheTokensWhoseTextIsInTheOutput) {
  StoriesEngineParts s = setup(64);
  LLMEngine engine(*s.runner, *s.tokenizer, engine_options());
  SamplingParams params = greedy(380);
  params.logprobs = 1;
  engine.add_request("story", prompt_of(*s.tokenizer, "Once upon a time"), params);
  std::string text;
  std::vector<OutputLogprob> logprobs;
  size_t tokens = 0;
  while (engine.has_unfinished()) {
    for (RequestOutput& output : engine.step()) {
      text += output.text;
      tokens += output.token_ids.size();
      logprobs.insert(logprobs.end(), output.logprobs.begin(), output.logprobs.end());
    }
  }
  ASSERT_EQ(tokens, 380u);
  const int32_t bos = *s.tokenizer->bos_id();
  ASSERT_NE(std::find(text.begin(), text.end(), '\n'), text.end());
  std::string joined;
  int64_t characters = 0;
  for (const OutputLogprob& shown : logprobs) {
    EXPECT_NE(shown.token.id, bos);
    EXPECT_EQ(shown.text_offset, characters);
    joined += shown.text;
    for (unsigned char byte : shown.text) characters += (byte & 0xC0) != 0x80;
  }
  EXPECT_EQ(joined, text);
  EXPECT_LT(logprobs.size(), tokens) << "the story must hold a <s> for this test to bite";
  EXPECT_NE(text.find("friend.\"Once upon"), std::string::npos) << "the <s> this test is about";
}

// Constrained requests beside free ones, greedy and sampled, with and without asynchronous
// scheduling, under preemption: every constrained output matches its grammar whole and ends with
// "stop" when the grammar is complete; the free requests get what they get alone; both modes
// give the same tokens.
TEST(LLMEngine, StructuredOutputsMatchTheirGrammarsInEveryMode) {
  OutputConstraint person;
  person.kind = OutputConstraint::Kind::json_schema;
  person.field = "response_format";
  person.text = R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
    "age":{"type":"integer","minimum":1,"maximum":99},"happy":{"type":"boolean"}},
    "required":["name","age","happy"],"additionalProperties":false})";
  OutputConstraint digits;
  digits.kind = OutputConstraint::Kind::regex;
  digits.field = "guided_regex";
  digits.text = "[0-9]{3}-[a-z]{2}";
  OutputConstraint answer;
  answer.kind = OutputConstraint::Kind::choice;
  answer.field = "guided_choice";
  answer.choices = {"yes", "no", "it was a dog"};
  const std::vector<int32_t> free_alone = alone(kPrompts[1], 40);
  std::map<bool, std::map<std::string, Finished>> results;
  for (bool async : {false, true}) {
    StoriesEngineParts s = setup(8, 2048, 128);  // 8 blocks of 16: preemption
    GrammarCompiler compiler(*s.tokenizer, s.model->config().vocab_size);
    EngineConfig options = engine_options(4, 64);
    options.scheduler.async_scheduling = async;
    LLMEngine engine(*s.runner, *s.tokenizer, options);
    auto add = [&](const std::string& id, size_t prompt, SamplingParams params,
                   const OutputConstraint* constraint) {
      if (constraint) params.grammar = compiler.compile(*constraint);
      engine.add_request(id, prompt_of(*s.tokenizer, kPrompts[prompt]), params);
    };
    SamplingParams sampled;
    sampled.temperature = 1.0;
    sampled.seed = 11;
    sampled.max_tokens = 100;
    SamplingParams greedy_until_done = greedy(100);
    greedy_until_done.ignore_eos = false;
    add("json-greedy", 0, greedy_until_done, &person);
    add("json-sampled", 2, sampled, &person);
    add("regex", 3, sampled, &digits);
    add("choice", 4, greedy_until_done, &answer);
    add("free", 1, greedy(40), nullptr);
    results[async] = run_all(engine);
    EXPECT_GT(engine.metrics().snapshot().grammar_mask_time.count(), 0);
    EXPECT_EQ(engine.kv_cache().num_free(), 8);
    EXPECT_GT(engine.metrics().snapshot().preemptions, 0) << "the test must preempt";
  }
  for (bool async : {false, true}) {
    auto& got = results[async];
    for (const auto& [id, constraint] :
         std::map<std::string, const OutputConstraint*>{{"json-greedy", &person},
                                                        {"json-sampled", &person},
                                                        {"regex", &digits},
                                                        {"choice", &answer}}) {
      EXPECT_EQ(got[id].reason, FinishReason::stop) << id << ": " << got[id].text;
      EXPECT_TRUE(GrammarAutomaton(constraint_grammar(*constraint)).matches(got[id].text))
          << id << ": " << got[id].text;
    }
    const auto parsed = nlohmann::json::parse(got["json-greedy"].text);
    EXPECT_TRUE(parsed["age"].is_number_integer() && parsed["happy"].is_boolean());
    EXPECT_EQ(got["free"].tokens, free_alone);
  }
  for (const auto& [id, expected] : results[false])
    EXPECT_EQ(results[true][id].tokens, expected.tokens) << id;
}
