// The FP8 KV cache (engine.kv_cache_dtype fp8) at the model level: against the cache of the model's
// dtype, a checkpoint's k_scale / v_scale as the cache's scales, and the GPU against the CPU.
// (The kernels against float64: tests/kernels/test_attention.cpp.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/config.h"
#include "engine/runner/model_runner.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "models/loaders/loaders.h"
#include "runtime/backend/backend.h"
#include "support/fp8_checkpoints.h"
#include "support/loader_files.h"
#include "support/runner_steps.h"

namespace tessera {
namespace {

using testing::compressed_config;
using testing::expect_close_with_the_same_picks;
using ::testing::HasSubstr;
using testing::Layout;
using testing::logits_of;
using testing::relative_difference;
using testing::TempDir;
using testing::token_activations;
using testing::write_fp8_folder;

// e4m3 K/V (a quarter of f32's bytes) move the logits only by their rounding (3 mantissa bits);
// eager and compiled run the same kernel; a kv_cache_dtype that is not e4m3 is refused.
TEST(Fp8KvCache, RunsCloseToTheCacheOfTheModelDtype) {
  const ModelWeights dense = load_model("synthetic:small", LoadOptions{});
  const auto fp8 = logits_of(dense, 6, CompilationMode::eager, "fp8");
  const double difference = relative_difference(fp8, logits_of(dense));
  std::printf("FP8 KV cache: max logit difference %.3e of the largest logit\n", difference);
  EXPECT_GT(difference, 0.0);
  EXPECT_LT(difference, 0.1);
  EXPECT_LT(relative_difference(logits_of(dense, 6, CompilationMode::compiled, "fp8_e4m3"), fp8),
            1e-5);
  std::shared_ptr<const CausalLM> model = create_model(dense, 64);
  RunnerConfig config = with_kv_blocks_for(testing::runner_config(CompilationMode::eager), 64);
  const size_t f32_bytes = ModelRunner(model, config).kv_cache_bytes();
  config.cache.kv_cache_dtype = "fp8";
  EXPECT_EQ(ModelRunner(model, config).kv_cache_bytes() * 4, f32_bytes);
  EXPECT_THAT(testing::error_of([] { load_run_config("", {"engine.kv_cache_dtype=fp8_e5m2"}); }),
              HasSubstr("auto, fp8, fp8_e4m3"));
}

// compressed-tensors' kv_cache_scheme: each layer's k_scale and v_scale are the cache's scales.
// Scales of 1 give the cache without a scheme exactly; a value scale so small that every code
// saturates changes the logits (so the scales are used); the model's dtype cache ignores them.
TEST(Fp8KvCache, TheCheckpointsScalesAreTheCachesScales) {
  const ModelWeights dense = load_model("synthetic:tiny", LoadOptions{});
  nlohmann::json quantization = compressed_config("channel", token_activations());
  // value_scales: per layer.
  auto write = [&](const std::string& folder, bool scheme, float key_scale,
                   const std::vector<float>& value_scales) {
    std::map<std::string, Tensor> scales;
    for (int64_t layer = 0; scheme && layer < dense.config.num_layers; ++layer) {
      const std::string prefix = fmt::format("model.layers.{}.self_attn.", layer);
      scales.emplace(prefix + "k_scale", Tensor::from_floats(std::vector<float>{key_scale}, {}));
      scales.emplace(prefix + "v_scale",
                     Tensor::from_floats(std::vector<float>{value_scales.at(layer)}, {1}));
    }
    nlohmann::json config = quantization;
    if (scheme)
      config["kv_cache_scheme"] = {
          {"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}};
    write_fp8_folder(folder, dense, Layout::channel, config, 0.05f, scales);
    return load_model(folder, LoadOptions{});
  };
  TempDir dir;
  const ModelWeights plain = write(dir / "plain", false, 1, {});
  const ModelWeights unit = write(dir / "unit", true, 1, {1, 1});
  const ModelWeights tiny_values = write(dir / "tiny", true, 0.5f, {1e-4f, 2e-4f});
  const KVCacheScales scales = create_model(tiny_values, 64)->kv_cache_scales(1);
  EXPECT_EQ(scales.key, 0.5f);
  EXPECT_EQ(scales.value, 2e-4f);
  EXPECT_EQ(create_model(plain, 64)->kv_cache_scales(0).value, 1.0f);
  const auto plain_logits = logits_of(plain, 6, CompilationMode::eager, "fp8");
  EXPECT_EQ(relative_difference(logits_of(unit, 6, CompilationMode::eager, "fp8"), plain_logits),
            0.0);
  EXPECT_GT(
      relative_difference(logits_of(tiny_values, 6, CompilationMode::eager, "fp8"), plain_logits),
      0.1);
  EXPECT_EQ(relative_difference(logits_of(tiny_values), logits_of(plain)), 0.0);
  // A scheme without its scales names the missing tensor.
  TempDir missing;
  EXPECT_THAT(testing::error_of([&] {
                nlohmann::json config = quantization;
                config["kv_cache_scheme"] = {{"num_bits", 8}, {"type", "float"}};
                write_fp8_folder(missing / "m", dense, Layout::channel, config);
                load_model(missing / "m", LoadOptions{});
              }),
              HasSubstr("model.layers.0.self_attn.k_scale"));
}

// On a GPU the cache write and every attention kernel read e4m3 as the CPU does: K and V that
// differ in a last bit (GEMM order) may round to a neighbouring code, so the bound and the
// greedy picks are checked as for FP8 weights.
TEST(GpuFp8KvCache, LogitsAndGreedyPicksMatchTheCpu) {
  Device gpu;
  if (!first_gpu(&gpu))
    GTEST_SKIP() << "no GPU device available (needs a CUDA or HIP build and a device)";
  const ModelWeights dense = load_model("synthetic:small", LoadOptions{});
  const auto cpu = logits_of(dense, 40, CompilationMode::eager, "fp8");
  for (CompilationMode mode : {CompilationMode::eager, CompilationMode::compiled}) {
    SCOPED_TRACE(enum_name(mode));
    const auto on_gpu =
        logits_of(load_model("synthetic:small", LoadOptions{DType::f32, gpu}), 40, mode, "fp8");
    expect_close_with_the_same_picks(on_gpu, cpu, 0.05,
                                     fmt::format("FP8 KV cache {}", enum_name(mode)));
  }
}

}  // namespace
}  // namespace tessera
