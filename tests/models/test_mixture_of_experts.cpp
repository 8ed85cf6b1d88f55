// Mixtures of experts (MixtralForCausalLM, Qwen3MoeForCausalLM; models/mixture_of_experts.h):
// compiled mode keeps fused_moe by default and records its decomposition when custom_ops turns it
// off, with no guard on the token count either way; compiled logits with the fused op equal
// transformers' (tests/data/hf_tiny; eager and fully decomposed runs are in test_llama.cpp); the
// expert fields of config.json are checked, and tensor parallelism's sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <regex>

#include "compile/config_enum.h"
#include "compile/custom_op_config.h"
#include "compile/ops/ops.h"
#include "compile/trace/tracer.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "models/mixture_of_experts.h"
#include "models/tensor_parallel.h"
#include "runtime/backend/backend.h"
#include "support/error_of.h"
#include "support/fp8_checkpoints.h"
#include "support/loader_files.h"
#include "support/runner_steps.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;

namespace {

const std::string kHfTiny = std::string(TESSERA_SOURCE_DIR) + "/tests/data/hf_tiny/";

std::shared_ptr<const CausalLM> load(const std::string& path) {
  return create_model(load_model(path, LoadOptions{DType::f32, kCPU}), 128);
}

// How many times `op` is called in a traced graph's listing.
size_t calls_of(const std::string& listing, const std::string& op) {
  const std::regex call("\\b" + op + "\\(");
  return static_cast<size_t>(std::distance(
      std::sregex_iterator(listing.begin(), listing.end(), call), std::sregex_iterator()));
}

TraceResult trace_forward(const CausalLM& model, const CustomOpConfig& custom_ops) {
  const std::vector<int64_t> ids{1, 5, 9, 200, 7}, positions{0, 1, 2, 3, 4};
  std::vector<Tensor> inputs{Tensor::from_ints(ids, {5}, DType::i32),
                             Tensor::from_ints(positions, {5}, DType::i32)};
  TraceOptions options;
  options.dynamic_dims = {{0, 0}, {1, 0}};
  options.custom_ops = custom_ops;
  return trace(
      [&](std::span<const Tensor> in) { return std::vector<Tensor>{model.forward(in[0], in[1])}; },
      inputs, options);
}

// A copy of tests/data/hf_tiny/<name> whose config.json `edit` changed.
std::string edited_copy(const TempDir& dir, const std::string& name,
                        const std::function<void(nlohmann::json&)>& edit) {
  const std::string folder = dir / name;
  std::filesystem::copy(kHfTiny + name, folder);
  nlohmann::json config;
  std::ifstream(folder + "/config.json") >> config;
  edit(config);
  write_text(folder + "/config.json", config.dump(2));
  return folder;
}

}  // namespace

TEST(MixtureOfExperts, CompiledModeKeepsFusedMoeUnlessCustomOpsTurnItOff) {
  EXPECT_TRUE(CustomOpConfig::parse({}, /*default_enabled=*/false).enabled("fused_moe"));
  EXPECT_FALSE(CustomOpConfig::parse({}, false).enabled("rms_norm"));  // the others still decompose
  EXPECT_FALSE(CustomOpConfig::parse({"none"}, false).enabled("fused_moe"));
  EXPECT_FALSE(CustomOpConfig::parse({"-fused_moe"}, false).enabled("fused_moe"));
  EXPECT_FALSE(CustomOpConfig::parse({"-fused_moe"}, true).enabled("fused_moe"));
  EXPECT_TRUE(CustomOpConfig::parse({"+rms_norm"}, false).enabled("fused_moe"));
  EXPECT_TRUE(CustomOpConfig::parse({}, true).enabled("fused_moe"));
}

TEST(MixtureOfExperts, TraceRecordsFusedMoeOrItsDecompositionWithNoGuardOnTheTokenCount) {
  for (const char* name : {"mixtral", "qwen3-moe"}) {
    auto model = load(kHfTiny + name);
    int64_t expert_layers = 0;
    for (int64_t layer = 0; layer < model->config().num_layers; ++layer)
      expert_layers += model->config().layer_has_experts(layer);
    TraceResult kept = trace_forward(*model, CustomOpConfig::parse({}, false));
    EXPECT_TRUE(kept.guards.empty()) << name << "\n" << kept.str();
    EXPECT_EQ(calls_of(kept.str(), "fused_moe"), static_cast<size_t>(expert_layers)) << name;
    TraceResult decomposed = trace_forward(*model, CustomOpConfig::parse({"none"}, false));
    EXPECT_TRUE(decomposed.guards.empty()) << name << "\n" << decomposed.str();
    EXPECT_EQ(calls_of(decomposed.str(), "fused_moe"), 0u) << name;
    EXPECT_EQ(calls_of(decomposed.str(), "moe_routing"), static_cast<size_t>(expert_layers))
        << name;
  }
}

TEST(MixtureOfExperts, CompiledLogitsWithTheFusedOpMatchTransformers) {
  for (const std::string name : {"mixtral", "qwen3-moe", "qwen3-moe-unnormalized"}) {
    const std::string folder = kHfTiny + name;
    const auto [ids, reference] = read_hf_tiny_expected(folder);
    RunnerConfig options = runner_config(CompilationMode::compiled);
    options.scheduler.max_num_batched_tokens = 64;
    options.compilation.cache_dir = fresh_temp_dir("cache_moe_" + name);
    auto model = load(folder);
    ModelRunner runner(model, with_kv_blocks_for(options, model->max_positions()));
    const auto chunked = logits_by_chunks(runner, ids, {7, 1, 12, 20});
    const size_t positions[] = {6, 7, 19, 39};  // the last token of each chunk
    for (size_t i = 0; i < chunked.size(); ++i)
      EXPECT_LT(relative_error(chunked[i], reference[positions[i]]), 1e-5)
          << name << " position " << positions[i];
  }
}

// GGUF as llama.cpp writes mixtures of experts (loader_files' llama_gguf): Mixtral as llama with
// expert_count, Qwen3-MoE as qwen3moe, each layer's experts stacked in ffn_gate_exps /
// ffn_up_exps / ffn_down_exps and its router in ffn_gate_inp (Qwen3-MoE's dense layer has none):
// the logits of the HF checkpoint the file was written from.
TEST(MixtureOfExperts, GgufFilesGiveTheLogitsOfTheirCheckpoints) {
  TempDir dir;
  for (const std::string name : {"mixtral", "qwen3-moe"}) {
    const std::string folder = kHfTiny + name;
    const ModelWeights hf = load_model(folder, LoadOptions{DType::f32, kCPU});
    const std::string gguf = dir / (name + ".gguf");
    llama_gguf(hf).save(gguf);
    const ModelWeights loaded = load_model(gguf, LoadOptions{DType::f32, kCPU});
    EXPECT_EQ(loaded.config.architecture, hf.config.architecture);
    EXPECT_EQ(loaded.config.expert_layers, hf.config.expert_layers);
    EXPECT_EQ(loaded.config.num_experts, 8);
    EXPECT_EQ(loaded.config.moe_intermediate_size, 32);
    const auto [ids, reference] = read_hf_tiny_expected(folder);
    std::shared_ptr<const CausalLM> model = create_model(ModelWeights(loaded), 128);
    ModelRunner runner(
        model, with_kv_blocks_for(runner_config(CompilationMode::eager), model->max_positions()));
    const auto chunked = logits_by_chunks(runner, ids, {9, 1, 30});
    EXPECT_LT(relative_error(chunked.back(), reference.back()), 1e-5) << name;
    EXPECT_LT(relative_error(chunked[1], reference[9]), 1e-5) << name;
  }
  // Gate and up projections in two formats are refused naming both (fused_moe takes one format
  // for all gate and up rows; llama.cpp's mixtures never split them).
  const ModelWeights hf = load_model(kHfTiny + "mixtral", LoadOptions{DType::f32, kCPU});
  const std::string q8 = dir / "mixtral-q8.gguf";
  GgufChanges changes;
  changes.ggml_types["blk.0.ffn_up_exps.weight"] = 8;  // Q8_0 (the bytes are not, but are enough)
  llama_gguf(hf, changes).save(q8);
  expect_mentions(error_of([&] {
                    create_model(load_model(q8, LoadOptions{DType::f32, kCPU}), 128);
                  }),
                  {"model.layers.0.block_sparse_moe.experts.0.w3.weight", "q8_0",
                   "model.layers.0.block_sparse_moe.experts.0.w1.weight", "f32", "one format"});
}

// On the GPU (kernels/cuda/experts/fused_moe.cu): f32 logits equal transformers' eagerly and in
// compiled mode with full and piecewise CUDA graphs (decode steps replay captured graphs, the
// routing on the device), with the op kept and decomposed.
TEST(GpuMixtureOfExperts, LogitsMatchTransformersEagerAndInCapturedGraphs) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  for (const std::string name : {"mixtral", "qwen3-moe", "qwen3-moe-unnormalized"}) {
    const std::string folder = kHfTiny + name;
    const auto [ids, reference] = read_hf_tiny_expected(folder);
    std::shared_ptr<const CausalLM> model =
        create_model(load_model(folder, LoadOptions{DType::f32, gpu}), 128);
    struct Mode {
      CompilationMode mode;
      const char* graphs;
      std::vector<std::string> custom_ops;
    };
    for (const Mode& mode : {Mode{CompilationMode::eager, "none", {"all"}},
                             Mode{CompilationMode::compiled, "full_and_piecewise", {}},
                             Mode{CompilationMode::compiled, "piecewise", {"none"}}}) {
      SCOPED_TRACE(fmt::format("{} {} {}", name, mode.graphs, fmt::join(mode.custom_ops, ",")));
      RunnerConfig options = runner_config(mode.mode);
      options.scheduler.max_num_batched_tokens = 64;
      options.compilation.custom_ops = mode.custom_ops;
      options.compilation.cudagraph_mode = parse_enum<CUDAGraphMode>(mode.graphs, "graphs");
      options.compilation.cudagraph_capture_sizes = {1, 2, 4, 8};
      options.compilation.cache_dir = fresh_temp_dir("cache_moe_gpu_" + name);
      ModelRunner runner(model, with_kv_blocks_for(options, model->max_positions()));
      const std::vector<int64_t> chunks = {7, 1, 1, 1, 12, 18};
      const auto chunked = logits_by_chunks(runner, ids, chunks);
      size_t position = 0;
      for (size_t i = 0; i < chunked.size(); ++i) {
        position += static_cast<size_t>(chunks[i]);
        EXPECT_LT(relative_error(chunked[i], reference[position - 1]), 1e-4)
            << "position " << position - 1;
      }
    }
  }
}

// bf16 on the GPU, compiled with full and piecewise graphs captured up to 32 tokens: the 12- and
// 18-token chunks (24 and 36 pairs over 8 experts) take fused_moe's tensor-core kernels inside
// the 16- and 32-token graphs, the decode steps the skinny one. Against the same bf16 model on
// the CPU, whose kernel rounds the activation to bf16 as the GPU's do.
TEST(GpuMixtureOfExperts, Bf16InCapturedGraphsMatchesTheCpu) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  for (const std::string name : {"mixtral", "qwen3-moe"}) {
    const std::string folder = kHfTiny + name;
    const std::vector<int32_t> ids = read_hf_tiny_expected(folder).input_ids;
    const std::vector<int64_t> chunks = {7, 1, 1, 1, 12, 18};
    std::vector<std::vector<std::vector<float>>> logits;
    for (const Device device : {gpu, kCPU}) {
      std::shared_ptr<const CausalLM> model =
          create_model(load_model(folder, LoadOptions{DType::bf16, device}), 128);
      RunnerConfig options =
          runner_config(device == gpu ? CompilationMode::compiled : CompilationMode::eager);
      options.scheduler.max_num_batched_tokens = 64;
      if (device == gpu) {
        options.compilation.cudagraph_mode = CUDAGraphMode::full_and_piecewise;
        options.compilation.cudagraph_capture_sizes = {1, 2, 4, 8, 16, 32};
        options.compilation.cache_dir = fresh_temp_dir("cache_moe_bf16_" + name);
      }
      ModelRunner runner(model, with_kv_blocks_for(options, model->max_positions()));
      logits.push_back(logits_by_chunks(runner, ids, chunks));
    }
    for (size_t i = 0; i < chunks.size(); ++i)
      EXPECT_LT(relative_error(logits[0][i],
                               std::vector<double>(logits[1][i].begin(), logits[1][i].end())),
                2e-2)
          << name << " chunk " << i;
  }
}

// The startup log's count: every tensor's parameters, and without the experts a token skips.
// A quantized synthetic mixture keeps its routers in the run dtype as llama.cpp's files do, its
// experts in the format asked for, and runs.
TEST(MixtureOfExperts, QuantizedSyntheticMixtureKeepsItsRoutersInFloat) {
  ModelWeights weights = load_model("synthetic:qwen3-moe-tiny:q8_0", LoadOptions{DType::f32, kCPU});
  EXPECT_EQ(weights.get("model.layers.1.mlp.gate.weight").dtype(), DType::f32);
  EXPECT_EQ(weights.get("model.layers.1.mlp.experts.7.down_proj.weight").dtype(), DType::q8_0);
  EXPECT_TRUE(is_router_weight("model.layers.0.block_sparse_moe.gate.weight"));
  EXPECT_FALSE(is_router_weight("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_TRUE(is_router_weight("model.layers.3.mlp.gate.weight"));
  EXPECT_FALSE(is_router_weight("model.layers.0.shared_mlp.gate.weight"));  // not ".mlp.gate"
  EXPECT_FALSE(is_router_weight("mlp.gate.weight"));                         // no layer
  std::shared_ptr<const CausalLM> model = create_model(std::move(weights), 64);
  ModelRunner runner(
      model, with_kv_blocks_for(runner_config(CompilationMode::compiled), model->max_positions()));
  const auto logits = logits_by_chunks(runner, {1, 5, 9, 200}, {4});
  ASSERT_EQ(logits.size(), 1u);
  for (float value : logits[0]) ASSERT_TRUE(std::isfinite(value));
}

// Stacking takes each layer's per-expert tensors out of the weights: loading never holds a
// second copy of every expert (it did, until the whole model was built), only of one layer's.
TEST(MixtureOfExperts, StackingHoldsOneLayersExpertsTwiceAtMost) {
  ModelWeights weights = load_model("synthetic:qwen3-moe-tiny", LoadOptions{DType::f32, kCPU});
  size_t expert_bytes = 0;
  for (const auto& [name, tensor] : weights.tensors)
    if (parse_expert_weight(name)) expert_bytes += tensor.nbytes();
  ASSERT_GT(expert_bytes, 0u);
  Allocator& allocator = backend(kCPU).allocator(0);
  const size_t before = allocator.stats().current_bytes;
  allocator.reset_peak();
  std::shared_ptr<const CausalLM> model = create_model(std::move(weights), 64);
  const MemoryStats after = allocator.stats();
  // 2 layers: one layer's experts stacked beside its parts is half of them, plus the other fused
  // copies (q/k/v) and the rotary table.
  EXPECT_LT(after.peak_bytes - before, expert_bytes);
  EXPECT_EQ(model->expert_weight_bytes(), expert_bytes);
}

TEST(MixtureOfExperts, ParametersAndThoseActivePerToken) {
  const ModelWeights weights = load_model(kHfTiny + "mixtral", LoadOptions{DType::f32, kCPU});
  int64_t total = 0;
  for (const auto& [name, tensor] : weights.tensors) total += tensor.numel();
  const int64_t skipped = 2 * (8 - 2) * 3 * 64 * 32;  // layers x unused experts x their weights
  EXPECT_EQ(expert_parameters_str(weights),
            fmt::format("{:.2f}M parameters, {:.2f}M active per token (2 of 8 experts in 2 layers)",
                        total / 1e6, (total - skipped) / 1e6));
}

TEST(MixtureOfExperts, ExpertFieldsOfConfigJsonAreChecked) {
  TempDir dir;
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::vector<std::string>>>
      cases = {
          {[](nlohmann::json& c) { c["num_experts_per_tok"] = 9; },
           {"num_experts_per_tok", "between 1 and num_experts (8)", "9"}},
          {[](nlohmann::json& c) { c["num_experts_per_tok"] = 0; }, {"num_experts_per_tok"}},
          {[](nlohmann::json& c) { c.erase("num_experts_per_tok"); }, {"num_experts_per_tok"}},
          {[](nlohmann::json& c) {
             c["mlp_only_layers"] = {0, 5};
           },
           {"mlp_only_layers", "5", "num_hidden_layers is 2"}},
          {[](nlohmann::json& c) { c["decoder_sparse_step"] = 0; }, {"decoder_sparse_step", "0"}},
          {[](nlohmann::json& c) { c["moe_intermediate_size"] = 0; }, {"moe_intermediate_size"}},
          {[](nlohmann::json& c) { c["num_local_experts"] = 100000; },
           {"num_experts", "100000", "more than Tessera accepts"}},
          {[](nlohmann::json& c) { c["num_local_experts"] = -1; }, {"experts", "negative", "-1"}},
          {[](nlohmann::json& c) { c["quantization_config"] = fp8_block_config(); },
           {"FP8 weights of a mixture of experts", "Qwen3MoeForCausalLM", "bf16 checkpoint"}},
      };
  int index = 0;
  for (const auto& [edit, mentions] : cases) {
    const std::string folder = edited_copy(dir, "qwen3-moe", edit);
    const std::string numbered = folder + std::to_string(index);
    std::filesystem::rename(folder, numbered);
    const std::string message = error_of([&] {
      load_model(numbered, LoadOptions{DType::f32, kCPU});
    });
    for (const std::string& part : mentions)
      EXPECT_THAT(message, HasSubstr(part)) << "case " << index;
    ++index;
  }
  // Mixtral needs experts; --quantization fp8 would leave them unquantized, so it is refused.
  const std::string mixtral =
      edited_copy(dir, "mixtral", [](nlohmann::json& c) { c["num_local_experts"] = 0; });
  expect_mentions(error_of([&] {
                    load_model(mixtral, LoadOptions{DType::f32, kCPU});
                  }),
                  {"num_local_experts must be at least 1", "0"});
  expect_mentions(error_of([&] {
                    load_model(kHfTiny + "qwen3-moe", LoadOptions{DType::f32, kCPU, "fp8"});
                  }),
                  {"--quantization fp8", "mixture of experts", "leave --quantization unset"});
  // fused_moe needs at least one expert, inside the router's.
  auto zeros = [](Shape sizes) {
    return Tensor::from_floats(std::vector<float>(static_cast<size_t>(shape_numel(sizes)), 0.0f),
                               sizes);
  };
  const Tensor x = zeros({2, 8}), logits = zeros({2, 4});
  expect_mentions(error_of([&] {
                    ops::fused_moe(x, logits, zeros({0, 6, 8}), zeros({0, 8, 3}), 1, true);
                  }),
                  {"fused_moe", "at least one expert"});
  expect_mentions(error_of([&] {
                    ops::fused_moe(x, logits, zeros({2, 6, 8}), zeros({2, 8, 3}), 1, true, 3);
                  }),
                  {"fused_moe", "first_expert (3)", "within the 4 router logits"});
}

// Tensor parallelism splits each expert's intermediate size, or with expert parallelism places
// whole experts on each rank (test_tensor_parallel.cpp checks the logits of both); a size that
// does not divide what it splits is refused naming it.
TEST(MixtureOfExperts, TensorParallelismNeedsASizeThatDividesTheExperts) {
  ModelConfig config = load_model(kHfTiny + "mixtral", LoadOptions{DType::f32, kCPU}).config;
  EXPECT_EQ(rank_config(config, 2).moe_intermediate_size, 16);
  const ModelConfig expert_rank = rank_config(config, 4, /*expert_parallel=*/true);
  EXPECT_EQ(expert_rank.moe_intermediate_size, 32);
  EXPECT_EQ(expert_rank.local_experts(), 2);
  config.num_experts = 6;
  expect_mentions(error_of([&] { check_tensor_parallel(config, 4, true); }),
                  {"engine.enable_expert_parallel", "num_experts (6)"});
  config.moe_intermediate_size = 30;
  expect_mentions(error_of([&] { check_tensor_parallel(config, 4); }),
                  {"engine.tensor_parallel_size 4", "moe_intermediate_size (30)",
                   "engine.enable_expert_parallel"});
  const ModelConfig dense = load_model(kHfTiny + "llama", LoadOptions{DType::f32, kCPU}).config;
  for (int size : {1, 2})
    expect_mentions(error_of([&] { check_tensor_parallel(dense, size, true); }),
                    {"engine.enable_expert_parallel", "LlamaForCausalLM has no experts"});
}
