// FP8 (e4m3) weights on the CPU: the e4m3 conversions against a search over every code;
// fp8_linear against a float64 evaluation of its definition (kernels/quant/fp8_scaling.h) for
// each scale layout and activation scale; HF folders in the fp8 and compressed-tensors formats
// written here from seeded weights, loaded, and run against the model of their dequantized
// weights; one set of numbers in three formats giving one model; --quantization fp8; the FP8 KV
// cache with and without a checkpoint's scales; and an error naming the key or tensor for every
// config option and checkpoint defect refused.
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
#include "support/loader_files.h"
#include "support/runner_steps.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

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

enum class Layout { block, channel, tensor_static };

struct WrittenFp8 {
  ModelWeights dequantized;  // the dense model of the numbers written
};

// Rows [row0, row0 + rows) x columns [col0, col0 + cols) of a row-major [n, k] tensor.
float block_amax(const std::vector<float>& values, int64_t k, int64_t row0, int64_t rows,
                 int64_t col0, int64_t cols) {
  float amax = 0;
  for (int64_t r = row0; r < row0 + rows; ++r)
    for (int64_t c = col0; c < col0 + cols; ++c)
      amax = std::max(amax, std::fabs(values[r * k + c]));
  return amax;
}

// Quantizes the projections of `dense` (f32) in `layout` and writes an HF folder with the
// quantization_config `quantization`; returns the dense model of the numbers written.
ModelWeights write_fp8_folder(const std::string& folder, const ModelWeights& dense, Layout layout,
                              const nlohmann::json& quantization, float input_scale = 0.05f,
                              const std::map<std::string, Tensor>& extra = {}) {
  ModelWeights file, dequantized = dense;
  file.config = dense.config;
  file.tensors = extra;
  for (const auto& [name, tensor] : dense.tensors) {
    if (!name.ends_with("_proj.weight")) {
      file.tensors.emplace(name, tensor);
      continue;
    }
    const std::string module = name.substr(0, name.size() - 7);
    const int64_t n = tensor.size(0), k = tensor.size(1);
    const std::vector<float> values = tensor.to_floats();
    Tensor codes = Tensor::empty({n, k}, DType::f8_e4m3);
    std::vector<float> back(values.size());
    auto* code = codes.data<uint8_t>();
    // The scale of element (r, c), by the layout.
    const int64_t row_blocks = (n + 127) / 128, column_blocks = (k + 127) / 128;
    std::vector<float> scales;
    if (layout == Layout::block) {
      for (int64_t rb = 0; rb < row_blocks; ++rb)
        for (int64_t cb = 0; cb < column_blocks; ++cb)
          scales.push_back(fp8_dynamic_scale(
              block_amax(values, k, rb * 128, std::min<int64_t>(128, n - rb * 128), cb * 128,
                         std::min<int64_t>(128, k - cb * 128))));
    } else if (layout == Layout::channel) {
      for (int64_t r = 0; r < n; ++r)
        scales.push_back(fp8_dynamic_scale(block_amax(values, k, r, 1, 0, k)));
    } else {
      scales.push_back(fp8_dynamic_scale(block_amax(values, k, 0, n, 0, k)));
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const float scale = layout == Layout::block ? scales[(r / 128) * column_blocks + c / 128]
                            : layout == Layout::channel ? scales[r]
                                                        : scales[0];
        code[r * k + c] = Float8E4M3::from_float(values[r * k + c] / scale);
        back[r * k + c] = Float8E4M3::to_float(code[r * k + c]) * scale;
      }
    file.tensors.emplace(name, codes);
    if (layout == Layout::block) {
      file.tensors.emplace(module + ".weight_scale_inv",
                           Tensor::from_floats(scales, {row_blocks, column_blocks}));
    } else if (layout == Layout::channel) {
      file.tensors.emplace(module + ".weight_scale", Tensor::from_floats(scales, {n, 1}));
    } else {
      file.tensors.emplace(module + ".weight_scale", Tensor::from_floats(scales, {}));
      file.tensors.emplace(module + ".input_scale",
                           Tensor::from_floats(std::vector<float>{input_scale}, {}));
    }
    dequantized.tensors[name] = Tensor::from_floats(back, {n, k});
  }
  nlohmann::json config = testing::hf_config_json(dense.config);
  config["quantization_config"] = quantization;
  testing::write_hf_folder(folder, file, config);
  return dequantized;
}

const nlohmann::json kBlockConfig = {{"quant_method", "fp8"},
                                     {"fmt", "e4m3"},
                                     {"activation_scheme", "dynamic"},
                                     {"weight_block_size", {128, 128}}};

nlohmann::json compressed_config(const std::string& weights, const nlohmann::json& activations) {
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"quantization_status", "compressed"},
          {"ignore", {"lm_head"}},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights",
               {{"num_bits", 8},
                {"type", "float"},
                {"strategy", weights},
                {"symmetric", true},
                {"dynamic", false},
                {"observer", "minmax"}}},
              {"input_activations", activations}}}}}};
}

const nlohmann::json kTokenActivations = {
    {"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}};
const nlohmann::json kStaticActivations = {
    {"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}};

// The last-token logits of each step of a fixed token sequence: a prompt of `prompt` tokens,
// then 8 decode steps.
std::vector<std::vector<float>> logits_of(ModelWeights weights, int64_t prompt = 6,
                                          CompilationMode mode = CompilationMode::eager,
                                          const std::string& kv_cache_dtype = "auto") {
  std::shared_ptr<const CausalLM> model = create_model(std::move(weights), 64);
  RunnerConfig config = testing::runner_config(mode);
  config.cache.kv_cache_dtype = kv_cache_dtype;
  ModelRunner runner(model, with_kv_blocks_for(config, model->max_positions()));
  std::vector<int32_t> ids;
  for (int i = 0; i < prompt + 8; ++i) ids.push_back((i * 37 + 5) % 512);
  std::vector<int64_t> chunks{prompt};
  chunks.resize(9, 1);
  return testing::logits_by_chunks(runner, ids, chunks);
}

// The largest |a - b| over all logits, of the largest |b|.
double relative_difference(const std::vector<std::vector<float>>& a,
                           const std::vector<std::vector<float>>& b) {
  double difference = 0, largest = 0;
  for (size_t step = 0; step < b.size(); ++step)
    for (size_t v = 0; v < b[step].size(); ++v) {
      difference = std::max<double>(difference, std::fabs(a[step][v] - b[step][v]));
      largest = std::max<double>(largest, std::fabs(b[step][v]));
    }
  return difference / largest;
}

// GPU logits against the CPU's: within `bound` of the largest, and the CPU's greedy pick wherever
// its lead over the runner-up is more than twice the measured difference (no perturbation that
// small can change it).
void expect_close_with_the_same_picks(const std::vector<std::vector<float>>& on_gpu,
                                      const std::vector<std::vector<float>>& cpu, double bound,
                                      const std::string& label) {
  const double difference = relative_difference(on_gpu, cpu);
  std::printf("%s: GPU against CPU, max logit difference %.3e of the largest\n", label.c_str(),
              difference);
  EXPECT_LT(difference, bound) << label;
  double largest = 0;
  for (const std::vector<float>& row : cpu)
    for (float value : row) largest = std::max<double>(largest, std::fabs(value));
  const auto pick = [](const std::vector<float>& row) {
    return std::max_element(row.begin(), row.end()) - row.begin();
  };
  for (size_t step = 0; step < cpu.size(); ++step) {
    std::vector<float> sorted = cpu[step];
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] > 2 * difference * largest) {
      EXPECT_EQ(pick(on_gpu[step]), pick(cpu[step])) << label << ", step " << step;
    }
  }
}

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
  const std::vector<Case> cases = {{"block", "small", Layout::block, kBlockConfig, {2, 2}},
                                   {"block_partial", "tiny", Layout::block, kBlockConfig, {1, 1}},
                                   {"channel_token",
                                    "small",
                                    Layout::channel,
                                    compressed_config("channel", kTokenActivations),
                                    {256}},
                                   {"tensor_static",
                                    "qwen3-tiny",
                                    Layout::tensor_static,
                                    compressed_config("tensor", kStaticActivations),
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
                                                compressed_config("channel", kTokenActivations));
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
                   kBlockConfig);
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
      {"block", Layout::block, kBlockConfig},
      {"channel", Layout::channel, compressed_config("channel", kTokenActivations)},
      {"static", Layout::tensor_static, compressed_config("tensor", kStaticActivations)}};
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

// ---- the FP8 KV cache ----

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
  nlohmann::json quantization = compressed_config("channel", kTokenActivations);
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
  const nlohmann::json channel = compressed_config("channel", kTokenActivations);
  const std::vector<std::pair<nlohmann::json, std::vector<std::string>>> cases = {
      {with(kBlockConfig, P("/quant_method"), "awq"), {"quant_method", "awq"}},
      {with(kBlockConfig, P("/fmt"), "e5m2"), {"fmt", "e5m2"}},
      {with(kBlockConfig, P("/weight_block_size"), {64, 64}), {"weight_block_size", "[64, 64]"}},
      {with(kBlockConfig, P("/activation_scheme"), "static"), {"activation_scheme", "static"}},
      {with(kBlockConfig, P("/activation_scheme"), "sometimes"), {"activation_scheme"}},
      {with(kBlockConfig, P("/shuffle"), true), {"shuffle", "true"}},
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
  const nlohmann::json channel = compressed_config("channel", kTokenActivations);
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
                     compressed_config("tensor", kStaticActivations), Layout::tensor_static),
              HasSubstr("below the smallest scale"));
  // Static activations without their input_scale.
  EXPECT_THAT(defect(edit([](ModelWeights& w) {
                       w.tensors.erase("model.layers.0.self_attn.o_proj.input_scale");
                     }),
                     compressed_config("tensor", kStaticActivations), Layout::tensor_static),
              HasSubstr("has no 'model.layers.0.self_attn.o_proj.input_scale'"));
}

// ---- tensor parallelism ----

TEST(Fp8TensorParallel, ScalesSplitWithTheirWeightsAndBlocksStayWhole) {
  TempDir dir;
  const ModelWeights dense = load_model("synthetic:small", LoadOptions{});
  write_fp8_folder(dir / "channel", dense, Layout::channel,
                   compressed_config("channel", kTokenActivations));
  const ModelWeights full = load_model(dir / "channel", LoadOptions{});
  const ModelWeights shard = shard_weights(full, TensorParallel{1, 2}, kCPU);
  // small: q rows 256 -> rows 128..255 on rank 1; o_proj's columns split, its rows' scales whole.
  const std::string q = "model.layers.0.self_attn.q_proj.weight_scale";
  EXPECT_EQ(shard.get(q).to_floats(), full.get(q).slice(0, 128, 256).contiguous().to_floats());
  const std::string o = "model.layers.0.self_attn.o_proj.weight_scale";
  EXPECT_EQ(shard.get(o).to_floats(), full.get(o).to_floats());
  EXPECT_EQ(shard.get("model.layers.0.self_attn.o_proj.weight").sizes(), (Shape{256, 128}));
  // Per 128x128 block: k/v rows of 128 over 2 ranks are 64, half a block.
  write_fp8_folder(dir / "block", dense, Layout::block, kBlockConfig);
  const ModelWeights blocks = load_model(dir / "block", LoadOptions{});
  EXPECT_THAT(testing::error_of([&] {
                shard_weights(blocks, TensorParallel{0, 2}, kCPU);
              }),
              HasSubstr("not whole blocks"));
}

}  // namespace
}  // namespace tessera
