// Weight loaders on real and synthetic models: the stories260K checkpoint in its three forms
// (llama2.c .bin, GGUF, HF safetensors folder) loads to the same tensors; synthetic models are
// deterministic and shaped by their configs; both load onto a GPU. (Files written here, round
// trips and corrupt files: test_loader_files.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>
#include <set>

#include "models/architecture_registry.h"
#include "models/loaders/expected_weights.h"
#include "models/loaders/gguf.h"
#include "models/loaders/loaders.h"
#include "models/loaders/safetensors.h"
#include "models/loaders/synthetic.h"
#include "models/model_weights.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"

#include "support/loader_files.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using loaders::GgufFile;
using namespace tessera::testing;

// ---- The real stories260K checkpoint in three formats ----

TEST(StoriesLoad, BinGgufAndHfFolderGiveTheSameTensorsAndConfig) {
  const ModelWeights bin = load_model(kStoriesBin, {});
  const ModelWeights gguf = load_model(kStoriesGguf, {});
  const ModelWeights hf = load_model(kStoriesHf, {});

  const ModelConfig& config = bin.config;
  EXPECT_EQ(config.architecture, "LlamaForCausalLM");
  EXPECT_EQ(config.vocab_size, 512);
  EXPECT_EQ(config.hidden_size, 64);
  EXPECT_EQ(config.intermediate_size, 172);
  EXPECT_EQ(config.num_layers, 5);
  EXPECT_EQ(config.num_heads, 8);
  EXPECT_EQ(config.num_kv_heads, 4);
  EXPECT_EQ(config.head_dim, 8);
  EXPECT_EQ(config.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(config.rope_theta, 10000.0);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.bos_token_id, 1);
  EXPECT_EQ(config.eos_token_ids, std::vector<int64_t>{2});
  expect_same_architecture(config, hf.config);
  expect_same_architecture(config, gguf.config);
  EXPECT_EQ(hf.config.max_position_embeddings, 512);
  EXPECT_EQ(gguf.config.max_position_embeddings, 2048);  // llama.cpp's converter writes 2048

  // The GGUF repeats the shared classifier as output.weight; a byte-identical copy counts as tied.
  ASSERT_NE(GgufFile(kStoriesGguf).find_tensor("output.weight"), nullptr);
  // 5 layers x 9 + embeddings + final norm; no lm_head (tied).
  EXPECT_EQ(bin.tensors.size(), 47u);
  EXPECT_FALSE(bin.has("lm_head.weight"));
  expect_same_tensors(hf, bin);
  expect_same_tensors(hf, gguf);
  EXPECT_EQ(bin.total_bytes(), 1044992u - 8 - 4856);  // the safetensors data section
}

TEST(StoriesLoad, QueryRowsArePermutedFromAdjacentPairsToRotateHalf) {
  // Read layer 1's wq straight from the .bin: header, embeddings, rms_att[5], wq[0], then wq[1].
  const std::vector<char> bytes = read_bytes(kStoriesBin);
  const int64_t dim = 64, vocab = 512, layers = 5, head_dim = 8;
  const size_t wq1 = 28 + 4 * static_cast<size_t>(vocab * dim + layers * dim + dim * dim);
  auto raw = [&](int64_t row, int64_t column) {
    float value;
    std::memcpy(&value, bytes.data() + wq1 + 4 * (row * dim + column), 4);
    return value;
  };
  const ModelWeights weights = load_model(kStoriesBin, {});
  const std::vector<float> q = weights.get("model.layers.1.self_attn.q_proj.weight").to_floats();
  int checked = 0;
  for (int64_t head = 0; head < dim / head_dim; ++head)
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t j = 0; j < head_dim / 2; ++j) {
        const int64_t hf_row = head * head_dim + half * head_dim / 2 + j;
        const int64_t llama2c_row = head * head_dim + 2 * j + half;
        for (int64_t column = 0; column < dim; ++column, ++checked)
          ASSERT_EQ(q[hf_row * dim + column], raw(llama2c_row, column))
              << "row " << hf_row << " column " << column;
      }
  EXPECT_EQ(checked, dim * dim);
  // The permutation is not the identity on this data.
  EXPECT_NE(q[1 * dim], raw(1, 0));
}

TEST(StoriesLoad, WeightsAreCastToTheRunDtype) {
  const ModelWeights f32 = load_model(kStoriesBin, {});
  for (DType dtype : {DType::bf16, DType::f16}) {
    const ModelWeights cast = load_model(kStoriesGguf, {dtype, kCPU});
    ASSERT_EQ(cast.tensors.size(), f32.tensors.size());
    EXPECT_EQ(cast.total_bytes() * 2, f32.total_bytes());
    for (const auto& [name, tensor] : f32.tensors) {
      const Tensor& converted = cast.get(name);
      ASSERT_EQ(converted.dtype(), dtype) << name;
      const std::vector<float> expected = tensor.to_floats();
      const std::vector<float> actual = converted.to_floats();
      for (size_t i = 0; i < expected.size(); ++i) {
        const float rounded = dtype == DType::bf16 ? static_cast<float>(BFloat16(expected[i]))
                                                   : static_cast<float>(Half(expected[i]));
        ASSERT_EQ(actual[i], rounded) << name << "[" << i << "] as " << dtype_name(dtype);
      }
    }
  }
}

TEST(StoriesLoad, GgufMetadataAndTokenizerAccessors) {
  const GgufFile file(kStoriesGguf);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.metadata().size(), 19u);
  EXPECT_EQ(file.tensors().size(), 48u);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_int("llama.block_count"), 5);
  EXPECT_EQ(file.get_int("llama.context_length"), 2048);
  const loaders::GgufTensorInfo* embedding = file.find_tensor("token_embd.weight");
  ASSERT_NE(embedding, nullptr);
  EXPECT_EQ(embedding->shape, (Shape{512, 64}));  // stored fastest-first as [64, 512]
  EXPECT_EQ(loaders::ggml_type_name(embedding->ggml_type), "F32");
  EXPECT_NE(error_of([&] { file.get_string("llama.block_count"); }).find("must be a string"),
            std::string::npos);
  expect_mentions(error_of([&] { file.get_int("llama.no_such_key"); }),
                  {kStoriesGguf, "llama.no_such_key"});

  const loaders::GgufTokenizerMetadata tokenizer = file.tokenizer_metadata();
  EXPECT_EQ(tokenizer.model, "llama");
  ASSERT_EQ(tokenizer.tokens.size(), 512u);
  EXPECT_EQ(tokenizer.scores.size(), 512u);
  EXPECT_EQ(tokenizer.token_types.size(), 512u);
  EXPECT_EQ(tokenizer.tokens[1], "<s>");
  EXPECT_EQ(tokenizer.tokens[2], "</s>");
  EXPECT_EQ(tokenizer.tokens[3], "<0x00>");
  EXPECT_EQ(tokenizer.token_types[3], 6);  // byte token
  EXPECT_EQ(tokenizer.bos_id, 1);
  EXPECT_EQ(tokenizer.eos_id, 2);
  EXPECT_FALSE(tokenizer.padding_id.has_value());  // stored as 0xffffffff: none
}

// ---- Synthetic models ----

TEST(SyntheticLoad, DeterministicShapedAndScaled) {
  for (const std::string name : {"tiny", "qwen3-tiny", "qwen2-tiny"}) {
    SCOPED_TRACE(name);
    const ModelWeights first = load_model("synthetic:" + name, {});
    const ModelWeights second = load_model("synthetic:" + name, {});
    expect_same_tensors(first, second);
    const std::vector<WeightSpec> specs = expected_weights(first.config);
    ASSERT_EQ(first.tensors.size(), specs.size());
    for (const WeightSpec& spec : specs) {
      const Tensor& tensor = first.get(spec.name, spec.shape);
      EXPECT_EQ(tensor.dtype(), DType::f32);
      const std::vector<float> values = tensor.to_floats();
      double sum = 0, sum_squares = 0;
      for (float value : values) {
        sum += value;
        sum_squares += value * value;
      }
      const double mean = sum / values.size();
      const double deviation = std::sqrt(sum_squares / values.size() - mean * mean);
      if (spec.name.find("norm.weight") != std::string::npos) {
        EXPECT_NEAR(mean, 1.0, 0.05) << spec.name;
        for (float value : values) ASSERT_TRUE(value >= 0.9f && value <= 1.1f) << spec.name;
      } else {
        EXPECT_NEAR(mean, 0.0, 0.01) << spec.name;
        if (values.size() >= 512) {
          EXPECT_NEAR(deviation, 0.02, 0.004) << spec.name;
        }
        for (float value : values) ASSERT_LE(std::abs(value), 0.0347f) << spec.name;
      }
    }
    // Tensors of one shape still hold different values.
    EXPECT_FALSE(bit_identical(first.get("model.layers.0.mlp.gate_proj.weight"),
                               first.get("model.layers.0.mlp.up_proj.weight")));
  }
}

TEST(SyntheticLoad, ArchitectureFeatures) {
  const ModelWeights tiny = load_model("synthetic:tiny", {});
  EXPECT_TRUE(tiny.has("lm_head.weight"));
  EXPECT_FALSE(tiny.has("model.layers.0.self_attn.q_proj.bias"));
  const ModelWeights qwen3 = load_model("synthetic:qwen3-tiny", {});
  EXPECT_TRUE(qwen3.config.qk_norm);
  EXPECT_EQ(qwen3.config.head_dim, 32);
  EXPECT_EQ(qwen3.get("model.layers.1.self_attn.q_norm.weight").sizes(), (Shape{32}));
  EXPECT_EQ(qwen3.get("model.layers.1.self_attn.q_proj.weight").sizes(), (Shape{128, 64}));
  EXPECT_FALSE(qwen3.has("lm_head.weight"));
  const ModelWeights qwen2 = load_model("synthetic:qwen2-tiny", {});
  EXPECT_TRUE(qwen2.config.attention_bias);
  EXPECT_EQ(qwen2.get("model.layers.0.self_attn.k_proj.bias").sizes(), (Shape{32}));
  EXPECT_FALSE(qwen2.has("model.layers.0.self_attn.o_proj.bias"));
}

TEST(SyntheticLoad, RunDtypeHoldsTheRoundedF32Values) {
  const ModelWeights f32 = load_model("synthetic:qwen2-tiny", {});
  const ModelWeights bf16 = load_model("synthetic:qwen2-tiny", {DType::bf16, kCPU});
  EXPECT_EQ(bf16.config.checkpoint_dtype, DType::bf16);
  for (const auto& [name, tensor] : f32.tensors) {
    const std::vector<float> expected = tensor.to_floats();
    const std::vector<float> actual = bf16.get(name).to_floats();
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_EQ(actual[i], static_cast<float>(BFloat16(expected[i]))) << name << "[" << i << "]";
  }
}

TEST(SyntheticLoad, ValuesDependOnlyOnTheTensorName) {
  // Same name and shape in two synthetic models: the same values; a longer tensor of that name
  // starts with them.
  const ModelWeights tiny = load_model("synthetic:tiny", {});
  const ModelWeights qwen2 = load_model("synthetic:qwen2-tiny", {});
  EXPECT_TRUE(bit_identical(tiny.get("model.layers.1.mlp.down_proj.weight"),
                            qwen2.get("model.layers.1.mlp.down_proj.weight")));
  const ModelWeights qwen3 = load_model("synthetic:qwen3-tiny", {});
  const std::vector<float> short_q = tiny.get("model.layers.0.self_attn.q_proj.weight").to_floats();
  const std::vector<float> long_q = qwen3.get("model.layers.0.self_attn.q_proj.weight").to_floats();
  ASSERT_EQ(long_q.size(), 2 * short_q.size());
  EXPECT_TRUE(std::equal(short_q.begin(), short_q.end(), long_q.begin()));
}

TEST(SyntheticLoad, Llama1bConfigAndShapesWithoutAllocating) {
  const ModelConfig config = loaders::synthetic_config("llama-1b");
  EXPECT_EQ(config.vocab_size, 128256);
  EXPECT_EQ(config.hidden_size, 2048);
  EXPECT_EQ(config.intermediate_size, 8192);
  EXPECT_EQ(config.num_layers, 16);
  EXPECT_EQ(config.num_heads, 32);
  EXPECT_EQ(config.num_kv_heads, 8);
  EXPECT_EQ(config.head_dim, 64);
  EXPECT_DOUBLE_EQ(config.rope_theta, 500000.0);
  EXPECT_EQ(config.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(config.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(config.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(config.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(config.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.eos_token_ids, std::vector<int64_t>{128001});
  const std::vector<WeightSpec> specs = expected_weights(config);
  EXPECT_EQ(specs.size(), 2u + 16u * 9u);
  int64_t parameters = 0;
  for (const WeightSpec& spec : specs) parameters += shape_numel(spec.shape);
  EXPECT_EQ(parameters, 1235814400);  // Llama-3.2-1B's published parameter count
  const auto k_proj = std::find_if(specs.begin(), specs.end(), [](const WeightSpec& spec) {
    return spec.name == "model.layers.15.self_attn.k_proj.weight";
  });
  ASSERT_NE(k_proj, specs.end());
  EXPECT_EQ(k_proj->shape, (Shape{512, 2048}));
}

TEST(SyntheticLoad, Qwen3SmallShapeMatchesItsPublishedConfig) {
  const ModelConfig config = loaders::synthetic_config("qwen3-0.6b");
  EXPECT_EQ(config.architecture, "Qwen3ForCausalLM");
  EXPECT_TRUE(config.qk_norm);
  EXPECT_EQ(config.head_dim, 128);  // not hidden / heads (64)
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.vocab_size, 151936);
  EXPECT_EQ(config.num_heads, 16);
  EXPECT_EQ(config.num_kv_heads, 8);
  EXPECT_DOUBLE_EQ(config.rope_theta, 1000000.0);
  EXPECT_DOUBLE_EQ(config.rms_norm_eps, 1e-6);
  EXPECT_EQ(config.max_position_embeddings, 40960);
  EXPECT_EQ(config.bos_token_id, 151643);
  EXPECT_EQ(config.eos_token_ids, std::vector<int64_t>{151645});
  const std::vector<WeightSpec> specs = expected_weights(config);
  EXPECT_EQ(specs.size(), 2u + 28u * 11u);  // q_norm and k_norm besides Llama's nine
  int64_t parameters = 0;
  for (const WeightSpec& spec : specs) parameters += shape_numel(spec.shape);
  EXPECT_EQ(parameters, 596049920);  // Qwen3-0.6B's parameter count
}

TEST(SyntheticLoad, UnknownNameListsTheKnownOnes) {
  expect_mentions(
      error_of([] { load_model("synthetic:gpt5", {}); }),
      {"synthetic:gpt5", "tiny", "llama-1b", "llama-8b", "qwen3-tiny", "qwen3-0.6b", "qwen2-tiny"});
}

TEST(GpuLoad, StoriesOnTheDeviceMatchTheCpuLoad) {
  Device gpu;
  if (!first_gpu(&gpu))
    GTEST_SKIP() << "no GPU device available (needs a CUDA or HIP build and a device)";
  const ModelWeights cpu = load_model(kStoriesHf, {});
  for (const std::string& path : {kStoriesBin, kStoriesGguf, kStoriesHf}) {
    const ModelWeights device = load_model(path, {DType::f32, gpu});
    ASSERT_EQ(device.tensors.size(), cpu.tensors.size()) << path;
    for (const auto& [name, tensor] : device.tensors) {
      EXPECT_EQ(tensor.device(), gpu) << path << " " << name;
      EXPECT_TRUE(bit_identical(tensor, cpu.get(name))) << path << " " << name;
    }
  }
}

TEST(GpuLoad, SyntheticLlama1bInBf16) {
  Device gpu;
  if (!first_gpu(&gpu))
    GTEST_SKIP() << "no GPU device available (needs a CUDA or HIP build and a device)";
  // The Llama-3.2-1B shape in bf16: 1,235,814,400 parameters, all on the device. Its
  // model.norm.weight starts with the tiny model's (values depend on the name only).
  const auto start = std::chrono::steady_clock::now();
  const ModelWeights big = load_model("synthetic:llama-1b", {DType::bf16, gpu});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("synthetic:llama-1b in bf16 on %s: %.2f s\n", gpu.str().c_str(), seconds);
  EXPECT_EQ(big.total_bytes(), 2u * 1235814400u);
  for (const WeightSpec& spec : expected_weights(big.config)) {
    const Tensor& tensor = big.get(spec.name, spec.shape);
    EXPECT_EQ(tensor.device(), gpu) << spec.name;
    EXPECT_EQ(tensor.dtype(), DType::bf16) << spec.name;
  }
  const std::vector<float> tiny_norm =
      load_model("synthetic:tiny", {DType::bf16, kCPU}).get("model.norm.weight").to_floats();
  const std::vector<float> big_norm = big.get("model.norm.weight").to_floats();
  EXPECT_TRUE(std::equal(tiny_norm.begin(), tiny_norm.end(), big_norm.begin()));
}

}  // namespace
}  // namespace tessera
