// FP8 (e4m3) weights on the CPU: the e4m3 conversions against a search over every code;
// fp8_linear against a float64 evaluation of its definition (kernels/quant/fp8_scaling.h) for
// each scale layout and activation scale; HF folders in the fp8 and compressed-tensors formats
// written here from seeded weights, loaded, and run against the model of their dequantized
// weights; one set of numbers in three formats giving one model; --quantization fp8; and an
// error naming the key or tensor for every config option and checkpoint defect refused. (The FP8
// KV cache: test_fp8_kv_cache.cpp.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compile/ops/ops.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "models/loaders/loaders.h"
#include "models/loaders/safetensors.h"
#include "models/tensor_parallel.h"
#include "runtime/backend/backend.h"
#include "runtime/float8.h"
#include "support/fp8_checkpoints.h"
#include "support/loader_files.h"
#include "support/runner_steps.h"

namespace tessera {
namespace {

using testing::compressed_config;
using testing::expect_close_with_the_same_picks;
using testing::fp8_block_config;
using ::testing::HasSubstr;
using testing::Layout;
using testing::logits_of;
using testing::relative_difference;
using testing::static_activations;
using testing::TempDir;
using testing::token_activations;
using testing::write_fp8_folder;

// ---- e4m3 ----

TEST(Float8E4M3, EveryCodeRoundTripsAndFloatsRoundToTheNearestCode) {
  for (int code = 0; code < 256; ++code) {
    const float value = Float8E4M3::to_float(static_cast<uint8_t>(code));
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(value)) << code;
      continue;
    }
    // -0 and +0 are both zero; every other code comes back as itself.
    if ((code & 0x7f) != 0) {
      EXPECT_EQ(Float8E4M3::from_float(value), code) << value;
    }
  }
  EXPECT_EQ(Float8E4M3::to_float(0x7e), 448.0f);
  EXPECT_EQ(Float8E4M3::to_float(0x01), 1.0f / 512.0f);  // the smallest subnormal
  // Nearest by search, ties to the even code; beyond 448 saturating.
  std::mt19937 random(7);
  std::uniform_real_distribution<float> exponent(-12.0f, 9.5f);
  for (int i = 0; i < 200000; ++i) {
    const float value = (i % 2 ? -1.0f : 1.0f) * std::exp2(exponent(random));
    int best = -1;
    float best_distance = INFINITY;
    for (int code = 0; code < 0x7f; ++code) {
      const float candidate = (value < 0 ? -1.0f : 1.0f) * Float8E4M3::to_float(code);
      const float distance = std::fabs(candidate - value);
      if (distance < best_distance || (distance == best_distance && code % 2 == 0)) {
        best = code;
        best_distance = distance;
      }
    }
    const uint8_t expected = static_cast<uint8_t>((value < 0 ? 0x80 : 0) | best);
    ASSERT_EQ(Float8E4M3::from_float(value), expected) << value;
  }
  EXPECT_EQ(Float8E4M3::from_float(1e6f), 0x7e);
  EXPECT_EQ(Float8E4M3::from_float(-1e6f), 0xfe);
  EXPECT_TRUE(std::isnan(static_cast<float>(Float8E4M3(NAN))));
}

// ---- fp8_linear against its definition ----

std::vector<float> seeded(int64_t count, uint32_t seed, float spread) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& value : values) value = normal(random);
  return values;
}

struct Fp8Case {
  int64_t m, n, k;
  bool block_scaled;
  Fp8ActivationScale activation;
};

// out[m, n] by the definition in float64 (codes decoded, scales applied per group).
std::vector<double> fp8_linear_definition(const std::vector<float>& x, const Fp8Case& c,
                                          const std::vector<uint8_t>& codes,
                                          const std::vector<float>& scales, float fixed) {
  const int64_t group = c.activation == Fp8ActivationScale::group ? kFp8Block : c.k;
  const int64_t column_blocks = (c.k + kFp8Block - 1) / kFp8Block;
  std::vector<double> out(static_cast<size_t>(c.m * c.n), 0.0);
  for (int64_t row = 0; row < c.m; ++row) {
    std::vector<double> quantized(static_cast<size_t>(c.k));
    for (int64_t first = 0; first < c.k; first += group) {
      const int64_t count = std::min(group, c.k - first);
      float amax = 0;
      for (int64_t i = 0; i < count; ++i)
        amax = std::max(amax, std::fabs(x[row * c.k + first + i]));
      const bool is_fixed = c.activation == Fp8ActivationScale::fixed;
      const float scale = is_fixed ? fixed : fp8_dynamic_scale(amax);
      const float inverse = is_fixed ? 1.0f / fixed : fp8_dynamic_inverse(amax);
      for (int64_t i = 0; i < count; ++i)
        quantized[first + i] = static_cast<double>(static_cast<float>(
                                   Float8E4M3(x[row * c.k + first + i] * inverse))) *
                               scale;
    }
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0;
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const double weight_scale =
            c.block_scaled ? scales[(j / kFp8Block) * column_blocks + kk / kFp8Block] : scales[j];
        sum += quantized[kk] * Float8E4M3::to_float(codes[j * c.k + kk]) * weight_scale;
      }
      out[row * c.n + j] = sum;
    }
  }
  return out;
}

TEST(Fp8Linear, CpuKernelComputesTheDefinitionForEveryScaleLayout) {
  const std::vector<Fp8Case> cases = {
      {1, 300, 200, true, Fp8ActivationScale::group},  // partial blocks both ways
      {5, 256, 384, true, Fp8ActivationScale::group},
      {3, 130, 257, true, Fp8ActivationScale::token},
      {4, 96, 160, false, Fp8ActivationScale::token},
      {17, 64, 64, false, Fp8ActivationScale::fixed},
      {2, 256, 256, true, Fp8ActivationScale::fixed}};
  for (const Fp8Case& c : cases) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(fmt::format("m {} n {} k {} {} {} {}", c.m, c.n, c.k,
                               c.block_scaled ? "block" : "channel",
                               fp8_activation_scale_name(c.activation), dtype_name(dtype)));
      std::vector<float> x = seeded(c.m * c.k, 1, 1.0f);
      x[3] = 40.0f;  // an outlier: its group's other values use few codes
      const std::vector<float> weight_values = seeded(c.n * c.k, 2, 200.0f);
      std::vector<uint8_t> codes(weight_values.size());
      for (size_t i = 0; i < codes.size(); ++i) codes[i] = Float8E4M3::from_float(weight_values[i]);
      const Shape scale_shape =
          c.block_scaled ? Shape{(c.n + 127) / 128, (c.k + 127) / 128} : Shape{c.n};
      std::vector<float> scales = seeded(shape_numel(scale_shape), 3, 1e-3f);
      for (float& scale : scales) scale = std::fabs(scale) + 1e-4f;
      const float fixed = 0.03f;
      // x rounded to its dtype first: the definition reads what the kernel reads.
      Tensor x_tensor = Tensor::from_floats(x, {c.m, c.k}, dtype);
      x = x_tensor.to_floats();
      Tensor weight = Tensor::empty({c.n, c.k}, DType::f8_e4m3);
      std::memcpy(weight.data_ptr(), codes.data(), codes.size());
      std::optional<Tensor> input_scale;
      if (c.activation == Fp8ActivationScale::fixed)
        input_scale = Tensor::from_floats(std::vector<float>{fixed}, {1});
      const Tensor out = ops::fp8_linear(x_tensor, weight, Tensor::from_floats(scales, scale_shape),
                                         fp8_activation_scale_name(c.activation), input_scale);
      ASSERT_EQ(out.dtype(), dtype);
      const std::vector<double> expected = fp8_linear_definition(x, c, codes, scales, fixed);
      const std::vector<float> actual = out.to_floats();
      double largest = 0;
      for (double value : expected) largest = std::max(largest, std::fabs(value));
      // f32 sums of up to 384 products (f32: 1e-6 of the largest); bf16 rounds the output once.
      const double bound = largest * (dtype == DType::f32 ? 2e-6 : 8e-3);
      for (size_t i = 0; i < expected.size(); ++i)
        ASSERT_NEAR(actual[i], expected[i], bound) << "output " << i;
    }
  }
}

TEST(Fp8Linear, MetaRefusesScalesThatDoNotFitTheWeight) {
  Tensor x = Tensor::from_floats(seeded(2 * 200, 1, 1.0f), {2, 200});
  Tensor weight = Tensor::empty({300, 200}, DType::f8_e4m3);
  std::memset(weight.data_ptr(), 0, weight.nbytes());
  auto error = [&](const Tensor& scale, const std::string& activation,
                   std::optional<Tensor> input_scale = {}) {
    return testing::error_of([&] { ops::fp8_linear(x, weight, scale, activation, input_scale); });
  };
  const Tensor channel = Tensor::from_floats(std::vector<float>(300, 1.0f), {300});
  EXPECT_THAT(error(Tensor::from_floats(std::vector<float>(4, 1.0f), {2, 2}), "token"),
              HasSubstr("block [3, 2]"));
  EXPECT_THAT(error(Tensor::from_floats(std::vector<float>(299, 1.0f), {299}), "token"),
              HasSubstr("per output channel [300]"));
  EXPECT_THAT(error(channel, "fixed"), HasSubstr("needs input_scale"));
  EXPECT_THAT(error(channel, "token", Tensor::from_floats(std::vector<float>{1.0f}, {1})),
              HasSubstr("takes no input_scale"));
  EXPECT_THAT(error(channel, "tensor"), HasSubstr("valid choices: token, group, fixed"));
}

// ---- checkpoints ----

// Each format loads as FP8 and runs close to the model of its dequantized numbers: only the
// activations' e4m3 rounding (3 mantissa bits: up to 1/16 of a value, 1/32 on average at
// random) separates them, 3-7% of the largest logit after 2-4 random layers (measured); a scale
// applied to the wrong rows or blocks moves the logits by their own size.
TEST(Fp8Checkpoint, EachFormatRunsCloseToTheModelOfItsDequantizedWeights) {
  struct Case {
    std::string name, synthetic;
    Layout layout;
    nlohmann::json quantization;
    Shape q_scale_shape;  // of model.layers.0.self_attn.q_proj.weight_scale
  };
  const std::vector<Case> cases = {
      {"block", "small", Layout::block, fp8_block_config(), {2, 2}},
      {"block_partial", "tiny", Layout::block, fp8_block_config(), {1, 1}},
      {"channel_token",
       "small",
       Layout::channel,
       compressed_config("channel", token_activations()),
       {256}},
      {"tensor_static",
       "qwen3-tiny",
       Layout::tensor_static,
       compressed_config("tensor", static_activations()),
       {128}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    const ModelWeights dense = load_model("synthetic:" + c.synthetic, LoadOptions{});
    const ModelWeights dequantized =
        write_fp8_folder(dir / c.name, dense, c.layout, c.quantization);
    ModelWeights loaded = load_model(dir / c.name, LoadOptions{});
    EXPECT_TRUE(loaded.config.fp8.enabled());
    EXPECT_EQ(loaded.get("model.layers.0.mlp.down_proj.weight").dtype(), DType::f8_e4m3);
    EXPECT_EQ(loaded.get("model.layers.0.self_attn.q_proj.weight_scale").sizes(), c.q_scale_shape);
    EXPECT_EQ(loaded.get("model.layers.0.input_layernorm.weight").dtype(), DType::f32);
    EXPECT_EQ(loaded.has("model.layers.0.self_attn.q_proj.input_scale"),
              c.layout == Layout::tensor_static);
    const double difference = relative_difference(logits_of(loaded), logits_of(dequantized));
    std::printf("%s: max logit difference %.3e of the largest logit\n", c.name.c_str(), difference);
    EXPECT_GT(difference, 0.0);  // the activations are rounded: not the dense model
    EXPECT_LT(difference, 0.15);
  }
}

// A per-channel checkpoint and --quantization fp8 of its dequantized numbers find the same codes
// and scales (up to a last bit of a scale): one model.
TEST(Fp8Checkpoint, ACheckpointAndItsQuantizationAtLoadTimeGiveOneModel) {
  TempDir dir;
  const ModelWeights dense = load_model("synthetic:small", LoadOptions{});
  const ModelWeights numbers = write_fp8_folder(dir / "channel", dense, Layout::channel,
                                                compressed_config("channel", token_activations()));
  const auto channel = logits_of(load_model(dir / "channel", LoadOptions{}));
  TempDir dense_dir;
  testing::write_hf_folder(dense_dir / "dense", numbers, testing::hf_config_json(numbers.config));
  LoadOptions online;
  online.quantization = "fp8";
  ModelWeights quantized = load_model(dense_dir / "dense", online);
  EXPECT_EQ(quantized.config.fp8.method, "online");
  EXPECT_EQ(quantized.get("model.layers.1.mlp.up_proj.weight").dtype(), DType::f8_e4m3);
  EXPECT_LE(relative_difference(logits_of(std::move(quantized)), channel), 1e-6);
}

// synthetic:NAME:fp8_block (for benchmarks of block-scaled weights): 128x128 block scales and
// activations per token and 128 columns, as a block checkpoint of the same numbers loads.
TEST(Fp8Checkpoint, SyntheticBlockWeightsAreABlockCheckpointOfTheSameNumbers) {
  ModelWeights synthetic = load_model("synthetic:small:fp8_block", LoadOptions{});
  EXPECT_EQ(synthetic.config.fp8.weight_scale, Fp8Format::WeightScale::block);
  EXPECT_EQ(synthetic.config.fp8.activation, Fp8ActivationScale::group);
  EXPECT_EQ(synthetic.get("model.layers.0.mlp.down_proj.weight").dtype(), DType::f8_e4m3);
  EXPECT_EQ(synthetic.get("model.layers.0.self_attn.q_proj.weight_scale").sizes(), (Shape{2, 2}));
  TempDir dir;
  write_fp8_folder(dir / "block", load_model("synthetic:small", LoadOptions{}), Layout::block,
                   fp8_block_config());
  // (The checkpoint divides by each scale where the load multiplies by its inverse: a last bit
  // may round a weight to the neighbouring code.)
  EXPECT_LT(relative_difference(logits_of(std::move(synthetic)),
                                logits_of(load_model(dir / "block", LoadOptions{}))),
            1e-2);
}

TEST(Fp8Checkpoint, QuantizationAtLoadTimeServesThroughTheEngine) {
  EngineConfig config = load_run_config(
      "", {"engine.model=synthetic:tiny", "engine.quantization=fp8", "engine.max_model_len=64"});
  auto models = load_run_models(config);
  EXPECT_THAT(models.front()->weight_formats_str(), HasSubstr("f8_e4m3"));
  EXPECT_THAT(testing::error_of([] { load_run_config("", {"engine.quantization=int4"}); }),
              HasSubstr("fp8"));
  // A model quantized otherwise already is refused by name.
  LoadOptions online;
  online.quantization = "fp8";
  EXPECT_THAT(testing::error_of([&] { load_model("synthetic:small:q8_0", online); }),
              HasSubstr("q8_0 already"));
}

// On a GPU: a 40-token prompt goes through cuBLASLt's FP8 matmul, the decode steps through the
// gemv. Both devices quantize x by the same arithmetic, but an x that differs in its last bit
// (summation order upstream) can round to the neighbouring e4m3 code, 1/16 of its value away:
// such flips move the logits by a few percent after 4 layers (3.3% measured on the H200), so
// the bound is 10%.
TEST(GpuFp8Checkpoint, LogitsAndGreedyPicksMatchTheCpu) {
  Device gpu;
  if (!first_gpu(&gpu))
    GTEST_SKIP() << "no GPU device available (needs a CUDA or HIP build and a device)";
  const ModelWeights dense = load_model("synthetic:small", LoadOptions{});
  struct Case {
    const char* name;
    Layout layout;
    nlohmann::json quantization;
  };
  const Case cases[] = {
      {"block", Layout::block, fp8_block_config()},
      {"channel", Layout::channel, compressed_config("channel", token_activations())},
      {"static", Layout::tensor_static, compressed_config("tensor", static_activations())}};
  for (const Case& c : cases) {
    TempDir dir;
    write_fp8_folder(dir / c.name, dense, c.layout, c.quantization);
    const auto cpu = logits_of(load_model(dir / c.name, LoadOptions{}), 40);
    for (CompilationMode mode : {CompilationMode::eager, CompilationMode::compiled}) {
      SCOPED_TRACE(fmt::format("{} {}", c.name, enum_name(mode)));
      const auto on_gpu =
          logits_of(load_model(dir / c.name, LoadOptions{DType::f32, gpu}), 40, mode);
      expect_close_with_the_same_picks(on_gpu, cpu, 0.1,
                                       fmt::format("{} {}", c.name, enum_name(mode)));
    }
  }
}

// ---- what is refused ----

std::string config_error(const nlohmann::json& quantization) {
  TempDir dir;
  nlohmann::json config = testing::hf_config_json(load_model("synthetic:tiny", {}).config);
  config["quantization_config"] = quantization;
  std::filesystem::create_directories(dir / "m");
  testing::write_text(dir / "m/config.json", config.dump());
  return testing::error_of([&] { loaders::read_hf_config(dir / "m"); });
}

TEST(Fp8Checkpoint, ConfigOptionsItWouldNotHonorAreRefusedNamingKeyAndValue) {
  auto with = [](nlohmann::json base, const nlohmann::json::json_pointer& at,
                 const nlohmann::json& value) {
    base[at] = value;
    return base;
  };
  using P = nlohmann::json::json_pointer;
  const nlohmann::json channel = compressed_config("channel", token_activations());
  const std::vector<std::pair<nlohmann::json, std::vector<std::string>>> cases = {
      {with(fp8_block_config(), P("/quant_method"), "awq"), {"quant_method", "awq"}},
      {with(fp8_block_config(), P("/fmt"), "e5m2"), {"fmt", "e5m2"}},
      {with(fp8_block_config(), P("/weight_block_size"), {64, 64}),
       {"weight_block_size", "[64, 64]"}},
      {with(fp8_block_config(), P("/activation_scheme"), "static"),
       {"activation_scheme", "static"}},
      {with(fp8_block_config(), P("/activation_scheme"), "sometimes"), {"activation_scheme"}},
      {with(fp8_block_config(), P("/shuffle"), true), {"shuffle", "true"}},
      {with(channel, P("/config_groups/group_0/weights/num_bits"), 4), {"num_bits", "4"}},
      {with(channel, P("/config_groups/group_0/weights/type"), "int"), {"weights.type", "int"}},
      {with(channel, P("/config_groups/group_0/weights/strategy"), "group"),
       {"weights.strategy", "group"}},
      {with(channel, P("/config_groups/group_0/input_activations"), nullptr),
       {"input_activations", "weight-only"}},
      {with(channel, P("/config_groups/group_0/input_activations/strategy"), "tensor"),
       {"input_activations.dynamic", "depend on the others"}},
      {with(channel, P("/config_groups/group_0/targets"), {"Attention"}), {"targets"}},
      {with(channel, P("/kv_cache_scheme"), {{"num_bits", 8}, {"strategy", "channel"}}),
       {"kv_cache_scheme.strategy", "channel"}},
      {with(channel, P("/kv_cache_scheme"), {{"num_bits", 8}, {"dynamic", true}}),
       {"kv_cache_scheme.dynamic", "static"}},
      {with(channel, P("/kv_cache_scheme"), {{"num_bits", 4}}), {"kv_cache_scheme.num_bits"}},
      {with(channel, P("/config_groups/group_1"), channel["config_groups"]["group_0"]),
       {"2 groups"}},
      {with(channel, P("/ignore"), {"re:(unclosed"}), {"(unclosed"}},
      {with(channel, P("/format"), "pack-quantized"), {"format", "pack-quantized"}},
      {with(channel, P("/config_groups/group_0/input_activations"),
            {{"num_bits", 8},
             {"type", "float"},
             {"strategy", "group"},
             {"group_size", 128},
             {"dynamic", true}}),
       {"input_activations.strategy", "strategy block"}}};
  for (const auto& [quantization, parts] : cases) {
    const std::string message = config_error(quantization);
    SCOPED_TRACE(quantization.dump());
    EXPECT_THAT(message, HasSubstr("quantization_config"));
    for (const std::string& part : parts) EXPECT_THAT(message, HasSubstr(part));
  }
}

TEST(Fp8Checkpoint, CheckpointDefectsAreRefusedNamingTheTensor) {
  const ModelWeights dense = load_model("synthetic:tiny", LoadOptions{});
  const std::string scale = "model.layers.1.mlp.up_proj.weight_scale";
  auto defect = [&](const std::function<void(const std::string&)>& damage,
                    const nlohmann::json& quantization, Layout layout = Layout::channel) {
    TempDir dir;
    write_fp8_folder(dir / "m", dense, layout, quantization);
    damage(dir / "m");
    return testing::error_of([&] { load_model(dir / "m", LoadOptions{}); });
  };
  // Rewrites the folder's tensors through fn.
  auto edit = [](const std::function<void(ModelWeights&)>& fn) {
    return [fn](const std::string& folder) {
      loaders::SafetensorsFile file(folder + "/model.safetensors");
      ModelWeights weights;
      for (const auto& [name, entry] : file.entries())
        weights.tensors.emplace(name, file.read(name));
      fn(weights);
      std::filesystem::remove(folder + "/model.safetensors");
      loaders::save_safetensors(folder + "/model.safetensors",
                                std::vector<std::pair<std::string, Tensor>>(weights.tensors.begin(),
                                                                            weights.tensors.end()));
    };
  };
  const nlohmann::json channel = compressed_config("channel", token_activations());
  EXPECT_THAT(defect(edit([&](ModelWeights& w) { w.tensors.erase(scale); }), channel),
              HasSubstr("has no scale '" + scale + "'"));
  EXPECT_THAT(defect(edit([&](ModelWeights& w) {
                       w.tensors[scale] = Tensor::from_floats(std::vector<float>(3, 1.0f), {3});
                     }),
                     channel),
              HasSubstr("'" + scale + "' has shape [3]"));
  EXPECT_THAT(defect(edit([&](ModelWeights& w) {
                       std::vector<float> values = w.tensors[scale].to_floats();
                       values[5] = -1.0f;
                       w.tensors[scale] = Tensor::from_floats(values, w.tensors[scale].sizes());
                     }),
                     channel),
              HasSubstr("holds -1 at index 5"));
  nlohmann::json ignoring = channel;
  ignoring["ignore"] = {"lm_head", "re:.*layers\\.1\\.mlp\\.up_proj"};
  EXPECT_THAT(defect([](const std::string&) {}, ignoring),
              HasSubstr("lists 'model.layers.1.mlp.up_proj' as not quantized"));
  // FP8 tensors without a quantization_config.
  EXPECT_THAT(defect(
                  [&](const std::string& folder) {
                    nlohmann::json config = testing::hf_config_json(dense.config);
                    testing::write_text(folder + "/config.json", config.dump());
                  },
                  channel),
              HasSubstr("no quantization_config"));
  // A norm stored in FP8.
  EXPECT_THAT(defect(edit([](ModelWeights& w) {
                       Tensor norm = Tensor::empty({64}, DType::f8_e4m3);
                       std::memset(norm.data_ptr(), 0x38, 64);
                       w.tensors["model.norm.weight"] = norm;
                     }),
                     channel),
              HasSubstr("'model.norm.weight' is FP8"));
  // A NaN code (e4m3's 0x7f) in a weight.
  EXPECT_THAT(
      defect(edit([](ModelWeights& w) {
               Tensor& down = w.tensors["model.layers.0.mlp.down_proj.weight"];
               down.data<uint8_t>()[7] = 0x7f;
             }),
             channel),
      HasSubstr("'model.layers.0.mlp.down_proj.weight' holds a NaN (code 0x7f) at element 7"));
  // A quantization_config over float tensors.
  {
    TempDir dir;
    nlohmann::json config = testing::hf_config_json(dense.config);
    config["quantization_config"] = channel;
    testing::write_hf_folder(dir / "m", dense, config);
    EXPECT_THAT(testing::error_of([&] { load_model(dir / "m", LoadOptions{}); }),
                HasSubstr("no projection is stored as F8_E4M3"));
  }
  // A fixed input scale whose inverse would overflow.
  EXPECT_THAT(defect(edit([](ModelWeights& w) {
                       w.tensors["model.layers.1.self_attn.o_proj.input_scale"] =
                           Tensor::from_floats(std::vector<float>{1e-39f}, {});
                     }),
                     compressed_config("tensor", static_activations()), Layout::tensor_static),
              HasSubstr("below the smallest scale"));
  // Static activations without their input_scale.
  EXPECT_THAT(defect(edit([](ModelWeights& w) {
                       w.tensors.erase("model.layers.0.self_attn.o_proj.input_scale");
                     }),
                     compressed_config("tensor", static_activations()), Layout::tensor_static),
              HasSubstr("has no 'model.layers.0.self_attn.o_proj.input_scale'"));
}

// ---- tensor parallelism ----

TEST(Fp8TensorParallel, ScalesSplitWithTheirWeightsAndBlocksStayWhole) {
  TempDir dir;
  const ModelWeights dense = load_model("synthetic:small", LoadOptions{});
  write_fp8_folder(dir / "channel", dense, Layout::channel,
                   compressed_config("channel", token_activations()));
  const ModelWeights full = load_model(dir / "channel", LoadOptions{});
  const ModelWeights shard = shard_weights(full, TensorParallel{1, 2}, kCPU);
  // small: q rows 256 -> rows 128..255 on rank 1; o_proj's columns split, its rows' scales whole.
  const std::string q = "model.layers.0.self_attn.q_proj.weight_scale";
  EXPECT_EQ(shard.get(q).to_floats(), full.get(q).slice(0, 128, 256).contiguous().to_floats());
  const std::string o = "model.layers.0.self_attn.o_proj.weight_scale";
  EXPECT_EQ(shard.get(o).to_floats(), full.get(o).to_floats());
  EXPECT_EQ(shard.get("model.layers.0.self_attn.o_proj.weight").sizes(), (Shape{256, 128}));
  // Per 128x128 block: k/v rows of 128 over 2 ranks are 64, half a block.
  write_fp8_folder(dir / "block", dense, Layout::block, fp8_block_config());
  const ModelWeights blocks = load_model(dir / "block", LoadOptions{});
  EXPECT_THAT(testing::error_of([&] {
                shard_weights(blocks, TensorParallel{0, 2}, kCPU);
              }),
              HasSubstr("not whole blocks"));
}

}  // namespace
}  // namespace tessera
