// CUDA graphs in the model runner (compilation.cudagraph_mode=piecewise): every compiled piece
// captured per capture size, attention run between the replays, batches padded up to the nearest
// captured size. Replays must give what the same compiled forward gives without graphs, for
// captured and padded sizes alike, across decode steps whose KV cache and metadata change, and
// with a second runner capturing in the same process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "engine/generator.h"
#include "engine/kv_cache_manager.h"
#include "engine/llm_engine.h"
#include "engine/runner/decode_graphs.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "models/loaders/loaders.h"
#include "models/tokenizer.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "support/runner_steps.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;

namespace {

const std::string kStories = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";

RunnerConfig compiled_runner(const std::string& graph_mode, const std::string& cache) {
  RunnerConfig options = runner_config(CompilationMode::compiled);
  options.scheduler.max_num_batched_tokens = 64;
  options.compilation.cache_dir = cache;
  options.compilation.cudagraph_mode = parse_enum<CUDAGraphMode>(graph_mode, "cudagraph_mode");
  options.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16, 32};
  return options;
}

std::shared_ptr<const CausalLM> stories(Device device) {
  return create_model(load_model(kStories + "/stories260K.bin", LoadOptions{DType::f32, device}),
                      256);
}

// The error a runner's construction throws ("" when it does not).
std::string runner_error(const std::shared_ptr<const CausalLM>& model,
                         const RunnerConfig& options) {
  try {
    ModelRunner runner(model, options);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

double rows_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  return relative_error(Tensor::from_floats(got, {static_cast<int64_t>(got.size())}),
                        Tensor::from_floats(want, {static_cast<int64_t>(want.size())}));
}

}  // namespace

TEST(CudaGraphs, PiecewiseOnTheCpuIsAClearError) {
  auto model = stories(kCPU);
  RunnerConfig options =
      with_kv_blocks_for(compiled_runner("piecewise", fresh_temp_dir("g")), model->max_positions());
  EXPECT_THAT(runner_error(model, options),
              HasSubstr("compilation.cudagraph_mode=piecewise needs a GPU"));
}

TEST(KvCacheSizing, TheCpuNeedsItsBlocksGiven) {
  auto model = stories(kCPU);
  // num_kv_blocks 0: sized from GPU memory, which the CPU has not
  RunnerConfig options = runner_config(CompilationMode::eager);
  EXPECT_THAT(runner_error(model, options), HasSubstr("engine.num_kv_blocks"));
}

TEST(GpuKvCacheSizing, BlocksComeFromFreeMemoryAndTooLittleIsAClearError) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  auto model = stories(gpu);
  auto [total, free] = backend(gpu).memory_info(gpu.index);
  RunnerConfig options = compiled_runner("piecewise", fresh_temp_dir("graphs_sizing"));
  options.cache.gpu_memory_utilization = 0.25;
  {
    ModelRunner runner(model, options);
    const double kv_bytes = static_cast<double>(runner.kv_cache_bytes());
    EXPECT_GT(kv_bytes, 0.2 * static_cast<double>(total) - static_cast<double>(total - free));
    EXPECT_LT(kv_bytes, 0.25 * static_cast<double>(total));
    std::vector<int32_t> ids{1, 2, 3, 4, 5};
    EXPECT_EQ(logits_by_chunks(runner, ids, {5}).size(), 1u);  // the cache it sized works
  }
  options.cache.gpu_memory_utilization = 1e-6;
  EXPECT_THAT(runner_error(model, options), HasSubstr("raise engine.gpu_memory_utilization"));
}

TEST(GpuCudaGraphs, ReplaysMatchTheCompiledForwardAtCapturedAndPaddedSizes) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  auto model = stories(gpu);
  const std::string cache = fresh_temp_dir("graphs_sizes");
  ModelRunner plain(model,
                    with_kv_blocks_for(compiled_runner("none", cache), model->max_positions()));
  ModelRunner graphs(
      model, with_kv_blocks_for(compiled_runner("piecewise", cache), model->max_positions()));
  // the eager forward, as called: the reference of every mode
  RunnerConfig eager_options = runner_config(CompilationMode::eager);
  ModelRunner eager(model, with_kv_blocks_for(eager_options, model->max_positions()));
  EXPECT_EQ(graphs.captured_sizes(), (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  EXPECT_TRUE(plain.captured_sizes().empty());
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 64; ++i) ids.push_back((i * 37 + 11) % 512);
  // Prefill chunks of every captured size (32, 16, 8, 4, 2, 1), of sizes padded up (3 -> 4,
  // 13 -> 16, 5 -> 8) and past the largest (40: no graph), then decode steps. The replays run the
  // same kernels as the compiled forward at the padded size; against it and against eager the
  // tolerance is 1e-5 in f32, since a padded GEMM has another M and cuBLAS may pick another
  // algorithm (and eager runs unfused kernels).
  for (const std::vector<int64_t>& chunks :
       {std::vector<int64_t>{32, 16, 8, 4, 2, 1}, {8, 1, 1, 16}, {3, 13, 5, 1, 1}, {40, 1, 1}}) {
    SCOPED_TRACE(::testing::PrintToString(chunks));
    auto compiled = logits_by_chunks(plain, ids, chunks);
    auto reference = logits_by_chunks(eager, ids, chunks);
    auto got = logits_by_chunks(graphs, ids, chunks);
    ASSERT_EQ(got.size(), compiled.size());
    for (size_t step = 0; step < got.size(); ++step) {
      EXPECT_LT(rows_relative_error(got[step], compiled[step]), 1e-5) << "step " << step;
      EXPECT_LT(rows_relative_error(got[step], reference[step]), 1e-5) << "step " << step;
    }
  }
}

TEST(GpuCudaGraphs, GreedyDecodeWithGraphsIsTokenForTokenTheSame) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  auto model = stories(gpu);
  auto tokenizer = load_tokenizer(kStories + "/tok512.bin");
  const std::string cache = fresh_temp_dir("graphs_decode");
  GenerateRequest request;
  request.prompt = "Once upon a time";
  request.sampling.temperature = 0;
  request.sampling.max_tokens = 64;
  request.sampling.ignore_eos = true;  // never stop early: 64 decode steps
  request.async_scheduling = false;
  auto run = [&](ModelRunner& runner) { return generate(runner, *tokenizer, request).output_ids; };
  RunnerConfig eager_options = runner_config(CompilationMode::eager);
  ModelRunner eager(model, with_kv_blocks_for(eager_options, model->max_positions()));
  std::vector<int32_t> want = run(eager);
  ASSERT_EQ(want.size(), 64u);
  for (const char* mode : {"piecewise", "full", "full_and_piecewise"}) {
    SCOPED_TRACE(mode);
    ModelRunner first(model,
                      with_kv_blocks_for(compiled_runner(mode, cache), model->max_positions()));
    EXPECT_EQ(run(first), want);
    // Each step's token taken from the draws on the device, in the graph's staged inputs.
    request.async_scheduling = true;
    EXPECT_EQ(run(first), want);
    request.async_scheduling = false;
    // A second runner capturing its own graphs leaves the first one's intact.
    ModelRunner second(model,
                       with_kv_blocks_for(compiled_runner(mode, cache), model->max_positions()));
    EXPECT_EQ(run(second), want);
    EXPECT_EQ(run(first), want);
  }
}

// Batches padded up to a captured size take their tokens from the draws on the device row by row
// (asynchronous scheduling), and decode as with the host in step.
TEST(GpuCudaGraphs, AsynchronousSchedulingDecodesBatchesAsSynchronousDoes) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  auto model = stories(gpu);
  auto tokenizer = load_tokenizer(kStories + "/tok512.bin");
  const std::string cache = fresh_temp_dir("graphs_async");
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog ran",
                                            "Lily and Ben", "One day, a big bird", "Tom"};
  for (const char* mode : {"piecewise", "full_and_piecewise"}) {
    SCOPED_TRACE(mode);
    ModelRunner runner(model, with_kv_blocks_for(compiled_runner(mode, cache), 1024));
    std::map<bool, std::map<std::string, std::vector<int32_t>>> tokens;
    for (bool async : {false, true}) {
      EngineConfig options;
      options.scheduler = runner.config().scheduler;  // the runner's token budget
      options.scheduler.async_scheduling = async;
      options.scheduler.max_num_seqs = 8;
      options.cache.enable_prefix_caching = false;
      LLMEngine engine(runner, *tokenizer, options);
      for (size_t i = 0; i < prompts.size(); ++i) {
        SamplingParams params;
        params.temperature = 0;
        params.ignore_eos = true;
        params.max_tokens = 20 + 7 * static_cast<int64_t>(i);  // the batch shrinks: 5, 4, ... 1
        engine.add_request(std::to_string(i), tokenizer->encode(prompts[i], true), params);
      }
      for (int step = 0; engine.has_unfinished() && step < 1000; ++step)
        for (const RequestOutput& output : engine.step()) {
          auto& got = tokens[async][output.request_id];
          got.insert(got.end(), output.token_ids.begin(), output.token_ids.end());
        }
      EXPECT_FALSE(engine.has_unfinished());
    }
    ASSERT_EQ(tokens[true].size(), prompts.size());
    for (const auto& [id, want] : tokens[false]) EXPECT_EQ(tokens[true][id], want) << id;
  }
}

// Sequences of different lengths prefilled one by one, then decoded together for `steps` steps
// with the same fed tokens: each step's logits, per sequence.
// The first sequence's prompt has `first_length` tokens, each next one 5 more.
std::vector<std::vector<std::vector<float>>> batched_decode(ModelRunner& runner, int64_t sequences,
                                                            int64_t steps,
                                                            int64_t first_length = 3) {
  KVCacheManager blocks(runner.num_kv_blocks(), runner.config().cache.block_size);
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(sequences));
  for (int64_t s = 0; s < sequences; ++s) {
    for (int64_t i = 0; i < first_length + 5 * s; ++i)
      ids[s].push_back(static_cast<int32_t>((s * 7 + i * 13) % 500 + 3));
    blocks.allocate(s, static_cast<int64_t>(ids[s].size()));
    SequenceInput prompt{ids[s], 0, blocks.block_table(s)};
    runner.execute(std::span(&prompt, 1));
  }
  std::vector<std::vector<std::vector<float>>> logits;
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<std::vector<int32_t>> next(static_cast<size_t>(sequences));
    std::vector<SequenceInput> batch;
    for (int64_t s = 0; s < sequences; ++s) {
      next[s] = {static_cast<int32_t>((step * 31 + s * 17) % 500 + 3)};
      const int64_t done = static_cast<int64_t>(ids[s].size());
      blocks.allocate(s, done + 1);
      ids[s].push_back(next[s][0]);
      batch.push_back(SequenceInput{next[s], done, blocks.block_table(s)});
    }
    logits.push_back(logits_to_host(runner.execute(batch)));
  }
  return logits;
}

// Every step's logits of every sequence within 1e-5 of the reference's.
void expect_same_logits(const std::vector<std::vector<std::vector<float>>>& got,
                        const std::vector<std::vector<std::vector<float>>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t step = 0; step < want.size(); ++step) {
    ASSERT_EQ(got[step].size(), want[step].size());
    for (size_t s = 0; s < want[step].size(); ++s)
      EXPECT_LT(rows_relative_error(got[step][s], want[step][s]), 1e-5)
          << "step " << step << " sequence " << s;
  }
}

TEST(GpuCudaGraphs, FullGraphsDecodeBatchesLikeTheCompiledForward) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  auto model = stories(gpu);
  const std::string cache = fresh_temp_dir("graphs_full");
  RunnerConfig plain_options = compiled_runner("none", cache);
  plain_options.cache.num_kv_blocks = 64;  // 9 sequences of up to 63 tokens
  ModelRunner plain(model, plain_options);
  RunnerConfig options = compiled_runner("full", cache);
  options.cache.num_kv_blocks = 64;
  options.scheduler.max_num_seqs = 9;  // full graphs for batches of 1, 2, 4 and 8 sequences
  ModelRunner full(model, options);
  EXPECT_TRUE(full.captured_sizes().empty());  // no piecewise graphs in mode full
  // Every captured batch (1, 2, 4, 8); 3 sequences replay the graph of 4 (one padding
  // sequence), and 9 have none.
  for (int64_t sequences : {1, 2, 3, 4, 8, 9}) {
    SCOPED_TRACE(fmt::format("{} sequences", sequences));
    expect_same_logits(batched_decode(full, sequences, 20), batched_decode(plain, sequences, 20));
  }
}

// Decode graphs come in length tiers (engine/runner/decode_graphs.h): a step replays the graph of
// the smallest tier holding its longest sequence. Batches whose longest sequence crosses from the
// 256-key tier into the model's (512) as they decode, one sequence alone and several of mixed
// lengths, decode as the compiled forward does.
TEST(GpuCudaGraphs, FullGraphsDecodeAcrossLengthTiersLikeTheCompiledForward) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  std::shared_ptr<const CausalLM> model =
      create_model(load_model(kStories + "/stories260K.bin", LoadOptions{DType::f32, gpu}), 512);
  const std::string cache = fresh_temp_dir("graphs_tiers");
  RunnerConfig plain_options = compiled_runner("none", cache);
  plain_options.cache.num_kv_blocks = 96;                // 4 sequences of up to 280 tokens
  plain_options.scheduler.max_num_batched_tokens = 256;  // the prompts, in one step each
  ModelRunner plain(model, plain_options);
  RunnerConfig options = compiled_runner("full", cache);
  options.cache.num_kv_blocks = 96;
  options.scheduler.max_num_batched_tokens = 256;
  options.scheduler.max_num_seqs = 4;
  ModelRunner full(model, options);
  ASSERT_NE(full.decode_graphs(), nullptr);
  EXPECT_EQ(full.decode_graphs()->length_tiers(), (std::vector<int64_t>{256, 512}));
  for (int64_t sequences : {1, 3}) {
    SCOPED_TRACE(fmt::format("{} sequences", sequences));
    // The longest sequence holds 240 + 5 (sequences - 1) tokens, then 16 more.
    expect_same_logits(batched_decode(full, sequences, 16, 240),
                       batched_decode(plain, sequences, 16, 240));
  }
}

TEST(DecodeLengthTiers, GrowFourfoldFrom256To16384ThenTheModelLength) {
  EXPECT_EQ(decode_length_tiers(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(decode_length_tiers(200), (std::vector<int64_t>{200}));
  EXPECT_EQ(decode_length_tiers(256), (std::vector<int64_t>{256}));
  EXPECT_EQ(decode_length_tiers(300), (std::vector<int64_t>{256, 300}));
  EXPECT_EQ(decode_length_tiers(4096), (std::vector<int64_t>{256, 1024, 4096}));
  EXPECT_EQ(decode_length_tiers(8192), (std::vector<int64_t>{256, 1024, 4096, 8192}));
  EXPECT_EQ(decode_length_tiers(131072), (std::vector<int64_t>{256, 1024, 4096, 16384, 131072}));
  EXPECT_EQ(decode_length_tiers(16385), (std::vector<int64_t>{256, 1024, 4096, 16384, 16385}));
}

// Programmatic dependent launch (compilation.programmatic_dependent_launch) changes when kernels
// are scheduled, never what they compute: with it on and off, launched one by one, in piecewise
// graphs and in full decode graphs, every step's logits are the same bits.
TEST(GpuCudaGraphs, ProgrammaticLaunchesComputeWhatPlainLaunchesDo) {
  Device gpu;
  if (!first_gpu(&gpu) || gpu.type != DeviceType::cuda) GTEST_SKIP() << "no CUDA device";
  for (DType dtype : {DType::f32, DType::bf16}) {
    std::shared_ptr<const CausalLM> model =
        create_model(load_model(kStories + "/stories260K.bin", LoadOptions{dtype, gpu}), 256);
    const std::string cache = fresh_temp_dir("graphs_programmatic");
    for (const char* mode : {"none", "piecewise", "full"}) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dtype), mode));
      RunnerConfig options = compiled_runner(mode, cache);
      options.cache.num_kv_blocks = 64;
      options.scheduler.max_num_seqs = 8;
      options.compilation.programmatic_dependent_launch = false;
      ModelRunner plain(model, options);
      options.compilation.programmatic_dependent_launch = true;
      ModelRunner programmatic(model, options);
      for (int64_t sequences : {1, 3, 8}) {
        SCOPED_TRACE(fmt::format("{} sequences", sequences));
        EXPECT_EQ(batched_decode(programmatic, sequences, 12),
                  batched_decode(plain, sequences, 12));
      }
    }
  }
}
