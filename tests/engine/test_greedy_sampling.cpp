// The greedy pick fused with the compiled LM head (compilation.fuse_greedy_sampling): a step of
// plain-greedy rows takes the argmax of the LM head's logits in the model's dtype, with no f32
// cast, and a full decode graph holds that pick and the hand-over of its draws to the next step.
// The ids must be those the sampler picks from the f32 logits, step after step, in the runner and
// in the engine (with asynchronous scheduling, and with sampled rows mixed in); the fused path
// must really skip the f32 logits and the launches outside the graph; and the argmax over
// vocabulary rows that a graph runs must be the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "compile/ops/ops.h"
#include "compile/piecewise_backend.h"
#include "compile/trace/dispatch.h"
#include "engine/kv_cache_manager.h"
#include "engine/llm_engine.h"
#include "engine/runner/run_setup.h"
#include "engine/sampler.h"
#include "kernels/sampling.h"
#include "models/architecture_registry.h"
#include "models/loaders/loaders.h"
#include "models/tokenizer.h"
#include "runtime/backend/backend.h"
#include "runtime/kernel_registry.h"
#include "runtime/profiler/profiler.h"
#include "support/forwarding_executor.h"
#include "support/runner_steps.h"
#include "support/test_tensors.h"

namespace tessera {
namespace {

const std::string kStories = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";

RunnerConfig compiled_options(bool fuse, const std::string& graph_mode, const std::string& name) {
  RunnerConfig options = testing::runner_config(CompilationMode::compiled);
  options.scheduler.max_num_batched_tokens = 64;
  options.compilation.cache_dir = testing::fresh_temp_dir(name);
  options.compilation.cudagraph_mode = parse_enum<CUDAGraphMode>(graph_mode, "cudagraph_mode");
  options.compilation.cudagraph_capture_sizes = {1, 2, 4, 8};
  options.compilation.fuse_greedy_sampling = fuse;
  options.scheduler.max_num_seqs = 8;
  return options;
}

std::vector<int64_t> ids_on_host(const Tensor& ids) {
  const Tensor host = ids.to(kCPU).contiguous();
  std::vector<int64_t> values;
  for (int64_t i = 0; i < host.size(0); ++i)
    values.push_back(host.dtype() == DType::i64 ? host.data<int64_t>()[i]
                                                : host.data<int32_t>()[i]);
  return values;
}

std::vector<int64_t> greedy_from_logits(const Tensor& logits) {
  static const SamplingParams greedy = [] {
    SamplingParams params;
    params.temperature = 0;
    return params;
  }();
  std::vector<SamplingRow> rows(static_cast<size_t>(logits.size(0)),
                                SamplingRow{&greedy, 0, 0, {}, {}});
  std::vector<int64_t> ids;
  for (const SampledToken& token : sample_tokens(logits, rows)) ids.push_back(token.id);
  return ids;
}

// Three sequences prefilled together (prompts of 5, 9 and 13 tokens), then `steps` decode steps
// feeding each sequence its own greedy pick, taken on the device from the step before
// (SequenceInput::sampled_row), as asynchronous scheduling does. Each step's picks, from
// execute_greedy; with `check_logits`, every step is run a second time through execute and the
// sampler, whose picks must be the same (the KV cache gets the same rows again).
std::vector<std::vector<int64_t>> greedy_steps(ModelRunner& runner, int64_t steps,
                                               bool check_logits) {
  constexpr int64_t kSequences = 3;
  KVCacheManager blocks(runner.num_kv_blocks(), runner.config().cache.block_size);
  std::vector<std::vector<int32_t>> prompts(kSequences);
  std::vector<SequenceInput> batch;
  for (int64_t s = 0; s < kSequences; ++s) {
    for (int64_t i = 0; i < 5 + 4 * s; ++i)
      prompts[s].push_back(static_cast<int32_t>((s * 37 + i * 11) % 400 + 5));
    blocks.allocate(s, static_cast<int64_t>(prompts[s].size()));
    batch.push_back(SequenceInput{prompts[s], 0, blocks.block_table(s)});
  }
  std::vector<std::vector<int64_t>> picks;
  Tensor previous;
  static const int32_t placeholder = 0;
  for (int64_t step = 0; step <= steps; ++step) {
    if (step > 0) {
      batch.clear();
      for (int64_t s = 0; s < kSequences; ++s) {
        const int64_t cached = static_cast<int64_t>(prompts[s].size()) + step - 1;
        blocks.allocate(s, cached + 1);
        batch.push_back(SequenceInput{std::span(&placeholder, 1), cached, blocks.block_table(s),
                                      static_cast<int32_t>(s)});
      }
    }
    if (check_logits) {
      const std::vector<int64_t> want = greedy_from_logits(runner.execute(batch, previous));
      previous = runner.execute_greedy(batch, previous);
      EXPECT_EQ(ids_on_host(previous), want) << "step " << step;
    } else {
      previous = runner.execute_greedy(batch, previous);
    }
    EXPECT_EQ(previous.dim(), 1);
    EXPECT_EQ(previous.size(0), kSequences);
    picks.push_back(ids_on_host(previous));
  }
  return picks;
}

// Launches whose name holds `part`.
size_t count_launches(const std::vector<LaunchRecord>& launches, const std::string& part) {
  return static_cast<size_t>(std::count_if(launches.begin(), launches.end(), [&](const auto& l) {
    return l.name.find(part) != std::string::npos;
  }));
}

TEST(FusedGreedySampling, TheCompiledLmHeadPicksWhatTheSamplerPicksFromTheLogits) {
  // bf16, so that the logits' f32 cast is a kernel the fused head leaves out.
  auto model = std::shared_ptr<const CausalLM>(
      create_model(load_model("synthetic:tiny", LoadOptions{DType::bf16, kCPU}), 64));
  std::map<std::string, std::vector<std::vector<int64_t>>> picks;
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "apart");
    ModelRunner runner(model, with_kv_blocks_for(compiled_options(fuse, "none", "greedy_cpu"),
                                                 model->max_positions()));
    picks[fuse ? "fused" : "apart"] = greedy_steps(runner, 6, /*check_logits=*/true);

    // One more prefill, profiled: the argmax reads the head's bf16 logits, with no f32 cast
    // between them; apart, the head casts to f32 first.
    KVCacheManager blocks(runner.num_kv_blocks(), runner.config().cache.block_size);
    blocks.allocate(0, 4);
    const std::vector<int32_t> prompt{7, 8, 9, 10};
    SequenceInput input{prompt, 0, blocks.block_table(0)};
    KernelProfiler profiler(kCPU, /*timing=*/true);
    {
      ProfilerScope active(profiler);
      profiler.start();
      (void)runner.execute_greedy(std::span(&input, 1), Tensor());
      profiler.stop();
    }
    const std::vector<LaunchRecord>& launches = profiler.launches();
    EXPECT_EQ(count_launches(launches, "argmax"), 1u);
    EXPECT_EQ(count_launches(launches, "cast"), fuse ? 0u : 1u);
  }
  ModelRunner eager(model, [&] {
    RunnerConfig options = testing::runner_config(CompilationMode::eager);
    return with_kv_blocks_for(options, model->max_positions());
  }());
  picks["eager"] = greedy_steps(eager, 6, /*check_logits=*/true);
  EXPECT_EQ(picks["fused"], picks["apart"]);
  EXPECT_EQ(picks["fused"], picks["eager"]);
}

// Gemma 2 softcaps its logits after the LM head's GEMM; fused with the f32 cast the softcap is
// never rounded to bf16, so the fused pick must read those f32 logits, not bf16 ones.
TEST(FusedGreedySampling, ASoftcappedHeadIsPickedFromItsF32Logits) {
  auto model = std::shared_ptr<const CausalLM>(
      create_model(load_model(std::string(TESSERA_SOURCE_DIR) + "/tests/data/hf_tiny/gemma2",
                              LoadOptions{DType::bf16, kCPU}),
                   64));
  ASSERT_GT(model->config().final_logit_softcapping, 0);
  EXPECT_FALSE(model->logits_end_in_gemm());
  ModelRunner runner(model, with_kv_blocks_for(compiled_options(true, "none", "greedy_softcap"),
                                               model->max_positions()));
  (void)greedy_steps(runner, 4, /*check_logits=*/true);
  // A prefill's launches through execute_greedy are execute's (the f32 head, its softcap and
  // cast in one kernel) and then the argmax.
  KVCacheManager blocks(runner.num_kv_blocks(), runner.config().cache.block_size);
  const std::vector<int32_t> prompt{7, 8, 9};
  std::vector<std::string> names[2];
  for (int greedy : {0, 1}) {
    blocks.allocate(greedy, 3);
    SequenceInput input{prompt, 0, blocks.block_table(greedy)};
    KernelProfiler profiler(kCPU, /*timing=*/true);
    {
      ProfilerScope active(profiler);
      profiler.start();
      if (greedy)
        (void)runner.execute_greedy(std::span(&input, 1), Tensor());
      else
        (void)runner.execute(std::span(&input, 1));
      profiler.stop();
    }
    for (const LaunchRecord& launch : profiler.launches()) names[greedy].push_back(launch.name);
  }
  names[0].push_back("argmax");
  EXPECT_EQ(names[1], names[0]);
}

// A runner seen only through execute: its greedy picks are the argmax of its f32 logits
// (ModelExecutor's execute_greedy), as the sampler picked them before the fusion.
class LogitsOnly final : public testing::ForwardingExecutor {
 public:
  using ForwardingExecutor::ForwardingExecutor;
};

// Requests that mix plain greedy rows with seeded sampling, penalties and logprobs: steps of
// plain-greedy rows take the fused pick, the others the sampler; with asynchronous scheduling a
// step takes its pending tokens from either. Every request draws the same tokens with the fusion
// on and off, and as the argmax of the f32 logits picks them.
std::map<std::string, std::vector<int32_t>> mixed_requests(ModelExecutor& runner,
                                                           const Tokenizer& tokenizer) {
  EngineConfig options;
  options.scheduler.max_num_seqs = 4;
  options.scheduler.max_num_batched_tokens = 24;  // chunked prefills beside decodes
  options.scheduler.async_scheduling = true;
  options.cache.enable_prefix_caching = false;
  LLMEngine engine(runner, tokenizer, options);
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog ran to the park",
                                            "Lily and Ben", "One day, a big bird", "Tom"};
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams params;
    params.temperature = 0;
    params.ignore_eos = true;
    params.max_tokens = 12 + 9 * static_cast<int64_t>(i);
    // The two that are not plain greedy finish early: requests 0, 2 and 4 then decode together
    // in plain-greedy steps.
    if (i == 1) {
      params.temperature = 0.9;
      params.seed = 11;
      params.max_tokens = 8;
    }
    if (i == 3) {
      params.logprobs = 2;
      params.max_tokens = 10;
    }
    engine.add_request(std::to_string(i), tokenizer.encode(prompts[i], true), params);
  }
  std::map<std::string, std::vector<int32_t>> tokens;
  for (int step = 0; engine.has_unfinished() && step < 1000; ++step)
    for (const RequestOutput& output : engine.step()) {
      EXPECT_TRUE(output.error.empty()) << output.error;
      auto& got = tokens[output.request_id];
      got.insert(got.end(), output.token_ids.begin(), output.token_ids.end());
    }
  EXPECT_FALSE(engine.has_unfinished());
  return tokens;
}

// The tokens of every request with the fusion on ("fused"), off ("apart"), and through the f32
// logits alone ("logits"), stories260K in bf16.
std::map<std::string, std::map<std::string, std::vector<int32_t>>> mixed_requests_three_ways(
    Device device, const std::string& graph_mode) {
  auto model = std::shared_ptr<const CausalLM>(create_model(
      load_model(kStories + "/stories260K.bin", LoadOptions{DType::bf16, device}), 256));
  auto tokenizer = load_tokenizer(kStories + "/tok512.bin");
  std::map<std::string, std::map<std::string, std::vector<int32_t>>> tokens;
  for (bool fuse : {true, false}) {
    ModelRunner runner(model,
                       with_kv_blocks_for(compiled_options(fuse, graph_mode, "greedy_mix"), 1024));
    tokens[fuse ? "fused" : "apart"] = mixed_requests(runner, *tokenizer);
    if (fuse) continue;
    LogitsOnly logits(runner);
    tokens["logits"] = mixed_requests(logits, *tokenizer);
  }
  return tokens;
}

TEST(FusedGreedySampling, TheEngineDrawsTheSameTokensWithTheFusionOnAndOff) {
  auto tokens = mixed_requests_three_ways(kCPU, "none");
  ASSERT_EQ(tokens["fused"].size(), 5u);
  EXPECT_EQ(tokens["fused"], tokens["logits"]);
  EXPECT_EQ(tokens["apart"], tokens["logits"]);
  EXPECT_EQ(tokens["fused"]["4"].size(), 48u);
}

TEST(GpuFusedGreedySampling, TheEngineDrawsTheSameTokensWithGreedyDecodeGraphs) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  auto tokens = mixed_requests_three_ways(gpu, "full_and_piecewise");
  ASSERT_EQ(tokens["fused"].size(), 5u);
  EXPECT_EQ(tokens["fused"], tokens["logits"]);
  EXPECT_EQ(tokens["apart"], tokens["logits"]);
}

// Greedy decode graphs pick what the logits graphs' sampler picks, at captured and padded batch
// sizes, with each step's tokens handed over from the step before; once the draws are the
// graphs' own, a decode step launches nothing of the sampler's outside the graph.
TEST(GpuFusedGreedySampling, GreedyDecodeGraphsPickAndHandOverInsideTheGraph) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  auto model = std::shared_ptr<const CausalLM>(
      create_model(load_model(kStories + "/stories260K.bin", LoadOptions{DType::f32, gpu}), 256));
  ModelRunner plain(model,
                    with_kv_blocks_for(compiled_options(false, "none", "greedy_graphs"), 1024));
  ModelRunner fused(model,
                    with_kv_blocks_for(compiled_options(true, "full", "greedy_graphs"), 1024));
  ModelRunner apart(model,
                    with_kv_blocks_for(compiled_options(false, "full", "greedy_graphs"), 1024));
  ASSERT_NE(fused.decode_graphs(), nullptr);
  EXPECT_TRUE(fused.decode_graphs()->has_greedy());
  EXPECT_FALSE(apart.decode_graphs()->has_greedy());
  const auto want = greedy_steps(plain, 12, /*check_logits=*/false);
  EXPECT_EQ(greedy_steps(fused, 12, /*check_logits=*/false), want);
  EXPECT_EQ(greedy_steps(fused, 12, /*check_logits=*/true), want);  // logits graphs in between
  EXPECT_EQ(greedy_steps(apart, 12, /*check_logits=*/false), want);

  // Launches from the host in a steady greedy decode step: with greedy graphs none is the
  // sampler's (the pick and the hand-over are graph nodes); without, the argmax and the
  // hand-over are.
  for (ModelRunner* runner : {&fused, &apart}) {
    KVCacheManager blocks(runner->num_kv_blocks(), runner->config().cache.block_size);
    const std::vector<int32_t> prompt{3, 4, 5};
    blocks.allocate(0, 3);
    SequenceInput input{prompt, 0, blocks.block_table(0)};
    Tensor previous = runner->execute_greedy(std::span(&input, 1), Tensor());
    static const int32_t placeholder = 0;
    for (int64_t step = 0; step < 3; ++step) {
      blocks.allocate(0, 4 + step);
      SequenceInput next{std::span(&placeholder, 1), 3 + step, blocks.block_table(0), 0};
      KernelProfiler counter(gpu, /*timing=*/false);
      {
        ProfilerScope active(counter);
        counter.start();
        previous = runner->execute_greedy(std::span(&next, 1), previous);
        counter.stop();
      }
      if (step == 0) continue;  // the prefill's draws were the compiled head's, not the graphs'
      const size_t sampling = counter.launch_counts()[static_cast<size_t>(KernelClass::sampling)];
      EXPECT_EQ(sampling, runner == &fused ? 0u : 2u) << "step " << step;
      EXPECT_EQ(counter.graph_replays(), 1u);
    }
  }
}

// The greedy pick of a decode graph: the first maximum of vocabulary-long bf16 rows by
// "greedy_pick" (split over the SMs with the caller's scratch) in a graph; and by the argmax op,
// which splits few rows outside a graph and runs a block per row (several loads in flight) in one.
// The first maximum wins, a NaN counts as the maximum, and a maximum in the last pack, in the
// unaligned tail or first of all is found, as the CPU finds it.
TEST(GpuFusedGreedySampling, TheArgmaxOfVocabularyRowsInAGraphIsTheCpusArgmax) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  for (int64_t vocab : {int64_t{128256}, int64_t{128259}}) {  // 128259: a tail past the packs
    SCOPED_TRACE(fmt::format("vocab {}", vocab));
    constexpr int64_t kRows = 9;
    std::vector<float> values(static_cast<size_t>(kRows * vocab));
    const Tensor noise = testing::random_tensor({kRows * vocab}, 7);
    for (size_t i = 0; i < values.size(); ++i) values[i] = noise.data<float>()[i];
    auto at = [&](int64_t row, int64_t column) -> float& {
      return values[static_cast<size_t>(row * vocab + column)];
    };
    at(0, 100000) = at(0, 120000) = 9;  // the first of two maxima
    at(1, 5000) = at(1, 70000) = NAN;   // the first NaN
    at(1, 3) = 9;
    at(2, vocab - 1) = 9;                              // the last column
    for (int64_t c = 0; c < vocab; ++c) at(3, c) = 1;  // all equal: 0
    at(4, 0) = 9;
    at(5, 64 * 1024 + 17) = 9;  // past the first round of loads in flight
    for (int64_t c = 0; c < vocab; ++c) at(7, c) = -INFINITY;  // all -inf: 0
    for (int64_t c = 0; c < vocab; ++c) at(8, c) = -1 - static_cast<float>(c % 5);
    at(8, 10) = -0.0f;  // -0 and +0 are equal: the first wins
    at(8, 20) = 0.0f;
    const Tensor logits = Tensor::from_floats(values, {kRows, vocab}, DType::bf16);
    const std::vector<int64_t> want = ids_on_host(
        run_kernel_of(OpRegistry::global().get("argmax"), std::span(&logits, 1), Attributes{})[0]);
    EXPECT_EQ(want[0], 100000);
    EXPECT_EQ(want[1], 5000);
    EXPECT_EQ(want[3], 0);
    EXPECT_EQ(want[7], 0);
    EXPECT_EQ(want[8], 10);

    const Tensor device_logits = logits.to(gpu);
    for (int64_t rows : {int64_t{1}, int64_t{3}, kRows}) {
      SCOPED_TRACE(fmt::format("{} rows", rows));
      const Tensor part = device_logits.slice(0, 0, rows);
      const std::vector<int64_t> first_rows(want.begin(), want.begin() + rows);
      EXPECT_EQ(ids_on_host(ops::argmax(part)), first_rows);  // split over the SMs
      // In a graph: the argmax op runs a block per row; greedy_pick splits with its workspace.
      const OpDef& op = OpRegistry::global().get("argmax");
      const Attributes attributes = prepare_attributes(op, std::span(&part, 1), Attributes{});
      Tensor op_ids = Tensor::empty({rows}, DType::i64, gpu);
      Tensor picked[] = {Tensor::empty({rows}, DType::i64, gpu),
                         Tensor::empty({kGreedyPickWorkspaceWords * rows}, DType::i64, gpu)};
      std::unique_ptr<Stream> stream = backend(gpu).create_stream(gpu.index);
      CapturedGraph graph = capture_graph(gpu, *stream, [&](Stream& on) {
        StreamGuard guard(on);
        run_kernel_into(op, std::span(&part, 1), attributes, std::span(&op_ids, 1));
        run_kernel("greedy_pick", gpu.type, KernelArgs{std::span(&part, 1), Attributes{}, picked});
      });
      graph.graph->replay(*stream);
      backend(gpu).synchronize(gpu.index);
      EXPECT_EQ(ids_on_host(op_ids), first_rows);
      EXPECT_EQ(ids_on_host(picked[0]), first_rows);
    }
  }
}

}  // namespace
}  // namespace tessera
