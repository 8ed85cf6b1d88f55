// Loaders on files written here: HF folders (sharded, Qwen2/Qwen3, Llama 3 rope scaling, Gemma
// layouts) and GGUF files round-trip; corrupt and inconsistent files fail with messages naming
// the file and the tensor or field.
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

// ---- HF folders and GGUF files written here ----

TEST(HfFolderLoad, ShardedQwen2WithIndexAndGenerationConfig) {
  TempDir dir;
  const ModelWeights source = load_model("synthetic:qwen2-tiny", {});
  nlohmann::json config = hf_config_json(source.config);
  config.erase("head_dim");  // defaults to hidden / heads = 16
  config["eos_token_id"] = 2;
  write_text(dir / "config.json", config.dump());
  write_text(dir / "generation_config.json", R"({"eos_token_id": [2, 7], "bos_token_id": 1})");
  // Two shards, split by name order, and the index naming them.
  std::vector<std::pair<std::string, Tensor>> first, second;
  nlohmann::json weight_map;
  for (const auto& [name, tensor] : source.tensors) {
    const bool in_first = name < "model.layers.1";
    (in_first ? first : second).push_back({name, tensor});
    weight_map[name] =
        in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  loaders::save_safetensors(dir / "model-00001-of-00002.safetensors", first);
  loaders::save_safetensors(dir / "model-00002-of-00002.safetensors", second);
  write_text(dir / "model.safetensors.index.json",
             nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump());

  const ModelWeights loaded = load_model(dir.str(), {});
  expect_same_tensors(source, loaded);
  EXPECT_EQ(loaded.config.eos_token_ids, (std::vector<int64_t>{2, 7}));
  EXPECT_EQ(loaded.config.head_dim, 16);
  EXPECT_TRUE(loaded.config.attention_bias);
  EXPECT_EQ(loaded.config.architecture, "Qwen2ForCausalLM");
}

TEST(HfFolderLoad, Qwen3AndLlama3RopeScalingConfigs) {
  TempDir dir;
  const ModelWeights qwen3 = load_model("synthetic:qwen3-tiny", {DType::bf16, kCPU});
  write_hf_folder(dir / "qwen3", qwen3, hf_config_json(qwen3.config));
  const ModelWeights loaded = load_model(dir / "qwen3", {DType::f32, kCPU});
  EXPECT_TRUE(loaded.config.qk_norm);
  EXPECT_EQ(loaded.config.head_dim, 32);
  EXPECT_EQ(loaded.config.checkpoint_dtype, DType::bf16);  // from the stored tensors
  EXPECT_EQ(loaded.get("model.layers.0.self_attn.k_norm.weight").dtype(), DType::f32);
  EXPECT_EQ(loaded.get("model.layers.0.self_attn.k_norm.weight").to_floats(),
            qwen3.get("model.layers.0.self_attn.k_norm.weight").to_floats());

  ModelConfig llama3 = loaders::synthetic_config("tiny");
  llama3.rope_scaling = RopeScaling{"llama3", 8.0, 1.0, 4.0, 8192};
  nlohmann::json json = hf_config_json(llama3);
  json["rope_scaling"].erase("rope_type");
  json["rope_scaling"]["type"] = "llama3";  // the older key
  write_hf_folder(dir / "llama3", load_model("synthetic:tiny", {}), json);
  const ModelConfig read = load_model(dir / "llama3", {}).config;
  EXPECT_EQ(read.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(read.rope_scaling.factor, 8.0);
  EXPECT_EQ(read.rope_scaling.original_max_position_embeddings, 8192);
}

TEST(HfFolderLoad, GemmaConfigsInTransformers5And4Layouts) {
  TempDir dir;
  const std::string tiny = std::string(TESSERA_SOURCE_DIR) + "/tests/data/hf_tiny/";
  auto read_json = [](const std::string& path) {
    nlohmann::json json;
    std::ifstream(path) >> json;
    return json;
  };
  auto read_changed = [&](const nlohmann::json& json) {
    write_text(dir / "config.json", json.dump());
    return loaders::read_hf_config(dir.str());
  };
  const std::vector<std::string> alternating = {kSlidingAttention, kFullAttention,
                                                kSlidingAttention, kFullAttention};
  // Gemma 3 as transformers 5 writes it: rope_parameters per layer type, layer_types.
  const ModelConfig v5 = loaders::read_hf_config(tiny + "gemma3");
  EXPECT_TRUE(v5.qk_norm);
  EXPECT_DOUBLE_EQ(v5.rope_theta, 1000000.0);
  EXPECT_EQ(v5.rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(v5.rope_scaling.factor, 2.0);
  EXPECT_DOUBLE_EQ(v5.rope_local_theta, 10000.0);
  EXPECT_DOUBLE_EQ(v5.query_pre_attn_scalar, 24.0);
  EXPECT_DOUBLE_EQ(v5.final_logit_softcapping, 3.0);
  EXPECT_DOUBLE_EQ(v5.attn_logit_softcapping, 0.0);
  EXPECT_EQ(v5.layer_sliding_window(0), 4);
  EXPECT_EQ(v5.layer_sliding_window(1), 0);
  EXPECT_EQ(v5.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(v5.tie_word_embeddings);
  // The same as transformers 4 wrote it: rope_theta, rope_scaling, rope_local_base_freq, and
  // sliding_window_pattern instead of layer_types.
  nlohmann::json gemma3 = read_json(tiny + "gemma3/config.json");
  gemma3.erase("rope_parameters");
  gemma3.erase("layer_types");
  gemma3["rope_theta"] = 1000000.0;
  gemma3["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  gemma3["rope_local_base_freq"] = 20000.0;
  gemma3["sliding_window_pattern"] = 2;
  const ModelConfig v4 = read_changed(gemma3);
  EXPECT_DOUBLE_EQ(v4.rope_theta, 1000000.0);
  EXPECT_EQ(v4.rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(v4.rope_scaling.factor, 2.0);
  EXPECT_DOUBLE_EQ(v4.rope_local_theta, 20000.0);
  EXPECT_EQ(v4.layer_types, alternating);
  // A flat rope_parameters gives the full layers' base.
  gemma3.erase("rope_theta");
  gemma3.erase("rope_scaling");
  gemma3["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  EXPECT_DOUBLE_EQ(read_changed(gemma3).rope_theta, 500000.0);

  // Gemma 2 without layer_types alternates, sliding first; a null softcap is off, an absent one
  // takes transformers' default.
  nlohmann::json gemma2 = read_json(tiny + "gemma2/config.json");
  gemma2.erase("layer_types");
  gemma2["attn_logit_softcapping"] = nullptr;
  ModelConfig read = read_changed(gemma2);
  EXPECT_EQ(read.layer_types, alternating);
  EXPECT_DOUBLE_EQ(read.attn_logit_softcapping, 0.0);
  EXPECT_DOUBLE_EQ(read.final_logit_softcapping, 3.0);
  EXPECT_DOUBLE_EQ(read.attention_scale(), 1.0 / std::sqrt(24.0));
  gemma2.erase("attn_logit_softcapping");
  gemma2.erase("final_logit_softcapping");
  read = read_changed(gemma2);
  EXPECT_DOUBLE_EQ(read.attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(read.final_logit_softcapping, 30.0);

  // Errors name the field.
  nlohmann::json bad = read_json(tiny + "gemma3/config.json");
  bad["attn_logit_softcapping"] = 10.0;  // transformers' Gemma 3 does not apply it
  expect_mentions(error_of([&] { read_changed(bad); }), {"attn_logit_softcapping", "Gemma3"});
  bad = read_json(tiny + "gemma3/config.json");
  bad["layer_types"][0] = "chunked_attention";
  expect_mentions(error_of([&] { read_changed(bad); }), {"layer_types", "chunked_attention"});
  bad = read_json(tiny + "gemma2/config.json");
  bad["sliding_window"] = 0;
  expect_mentions(error_of([&] { read_changed(bad); }), {"config.json", "sliding_window"});
  bad = read_json(tiny + "gemma2/config.json");
  bad["final_logit_softcapping"] = -1.0;
  expect_mentions(error_of([&] { read_changed(bad); }), {"final_logit_softcapping", "positive"});
}

TEST(GgufLoad, LlamaRoundTripUnpermutesQueryAndKeyRows) {
  TempDir dir;
  const ModelWeights source = load_model("synthetic:tiny", {});  // untied: has output.weight
  llama_gguf(source).save(dir / "tiny.gguf");
  const ModelWeights loaded = load_model(dir / "tiny.gguf", {});
  expect_same_tensors(source, loaded);
  expect_same_architecture(source.config, loaded.config);
  EXPECT_FALSE(loaded.config.tie_word_embeddings);
}

TEST(GgufLoad, Llama3RopeScalingRecoveredFromRopeFreqs) {
  TempDir dir;
  ModelWeights source = load_model("synthetic:tiny", {});
  source.config.rope_theta = 500000.0;
  // The table llama.cpp's converter writes for factor 32, low 1, high 4, original 8192.
  const double theta = 500000.0, factor = 32.0, original = 8192.0;
  const int64_t head_dim = source.config.head_dim;
  std::vector<float> table;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const double wavelength =
        2 * std::numbers::pi * std::pow(theta, static_cast<double>(i) / head_dim);
    if (wavelength < original / 4) {
      table.push_back(1.0f);
    } else if (wavelength > original) {
      table.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (original / wavelength - 1.0) / 3.0;
      table.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  // head_dim 16 at theta 5e5 covers all three regions: 1, a smooth ramp, and the full factor.
  ASSERT_EQ(table.front(), 1.0f);
  ASSERT_EQ(table.back(), 32.0f);
  const Tensor rope_freqs = Tensor::from_floats(table, {static_cast<int64_t>(table.size())});
  GgufWriter writer = llama_gguf(source);
  writer.add_tensor("rope_freqs.weight", rope_freqs);
  writer.save(dir / "scaled.gguf");
  const ModelWeights loaded = load_model(dir / "scaled.gguf", {});
  EXPECT_EQ(loaded.config.rope_scaling.type, "llama3");
  EXPECT_FLOAT_EQ(loaded.config.rope_scaling.factor, 32.0);
  EXPECT_EQ(loaded.config.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FALSE(loaded.has("rope_freqs.weight"));
  expect_same_tensors(source, loaded);

  // The same table in a file whose theta is 10000 matches no llama3 scaling: refused, named.
  source.config.rope_theta = 10000.0;
  GgufWriter mismatched = llama_gguf(source);
  mismatched.add_tensor("rope_freqs.weight", rope_freqs);
  mismatched.save(dir / "mismatched.gguf");
  expect_mentions(error_of([&] { load_model(dir / "mismatched.gguf", {}); }),
                  {dir / "mismatched.gguf", "rope_freqs.weight", "llama3"});
}

// ---- Corrupt and inconsistent files ----

TEST(LoaderErrors, TruncatedSafetensors) {
  TempDir dir;
  write_hf_folder(dir / "model", load_model("synthetic:tiny", {}),
                  hf_config_json(loaders::synthetic_config("tiny")));
  const std::string file = dir / "model/model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100);
  // The last tensor in the data section is the one cut: the header lists names in order.
  expect_mentions(error_of([&] { load_model(dir / "model", {}); }),
                  {file, "model.norm.weight", "truncated"});
}

TEST(LoaderErrors, SafetensorsHeaderLengthPastEndOfFile) {
  TempDir dir;
  const std::string file = dir / "bad.safetensors";
  const uint64_t header_length = 1'000'000;
  std::string bytes(reinterpret_cast<const char*>(&header_length), 8);
  bytes += R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  write_text(file, bytes);
  expect_mentions(error_of([&] { loaders::SafetensorsFile reader(file); }),
                  {file, "header length 1000000", "past the end"});
  write_text(dir / "tiny.safetensors", "abc");
  expect_mentions(error_of([&] { loaders::SafetensorsFile reader(dir / "tiny.safetensors"); }),
                  {"tiny.safetensors", "too small"});
}

TEST(LoaderErrors, SafetensorsUnsupportedDtypeAndSizeMismatch) {
  TempDir dir;
  auto write_header = [&](const std::string& path, const std::string& header, size_t data_bytes) {
    const uint64_t length = header.size();
    std::string bytes(reinterpret_cast<const char*>(&length), 8);
    bytes += header;
    bytes.append(data_bytes, '\x01');
    write_text(path, bytes);
  };
  write_header(dir / "size.safetensors",
               R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24);
  expect_mentions(error_of([&] { loaders::SafetensorsFile reader(dir / "size.safetensors"); }),
                  {"size.safetensors", "'w'", "needs 24 bytes"});
  write_header(dir / "e5m2.safetensors",
               R"({"w":{"dtype":"F8_E5M2","shape":[4],"data_offsets":[0,4]}})", 4);
  const loaders::SafetensorsFile e5m2(dir / "e5m2.safetensors");
  expect_mentions(error_of([&] { e5m2.stored(*e5m2.find("w")); }),
                  {"e5m2.safetensors", "'w'", "F8_E5M2"});
}

TEST(LoaderErrors, MissingTensorAndWrongShape) {
  TempDir dir;
  ModelWeights weights = load_model("synthetic:tiny", {});
  const nlohmann::json config = hf_config_json(weights.config);
  ModelWeights missing = weights;
  missing.tensors.erase("model.layers.1.mlp.up_proj.weight");
  write_hf_folder(dir / "missing", missing, config);
  expect_mentions(error_of([&] { load_model(dir / "missing", {}); }),
                  {dir / "missing/model.safetensors", "model.layers.1.mlp.up_proj.weight",
                   "[172, 64]", "missing"});

  ModelWeights reshaped = weights;
  reshaped.tensors["model.layers.0.self_attn.k_proj.weight"] =
      weights.get("model.layers.0.self_attn.q_proj.weight");  // [64, 64] where [32, 64] belongs
  write_hf_folder(dir / "reshaped", reshaped, config);
  expect_mentions(error_of([&] { load_model(dir / "reshaped", {}); }),
                  {dir / "reshaped/model.safetensors", "model.layers.0.self_attn.k_proj.weight",
                   "[64, 64]", "[32, 64]"});
}

TEST(LoaderErrors, UnknownArchitectureAndBadConfigFields) {
  TempDir dir;
  const ModelWeights weights = load_model("synthetic:tiny", {});
  nlohmann::json config = hf_config_json(weights.config);
  config["architectures"] = {"GPT2LMHeadModel"};
  write_hf_folder(dir / "gpt2", weights, config);
  expect_mentions(error_of([&] { load_model(dir / "gpt2", {}); }),
                  {dir / "gpt2/config.json", "GPT2LMHeadModel", "LlamaForCausalLM",
                   "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"});

  config = hf_config_json(weights.config);
  config["hidden_size"] = "sixty-four";
  write_text(dir / "gpt2/config.json", config.dump());
  expect_mentions(error_of([&] { load_model(dir / "gpt2", {}); }),
                  {"config.json", "hidden_size", "integer"});

  config = hf_config_json(weights.config);
  config["num_key_value_heads"] = 3;  // 4 heads are not a multiple of 3
  write_text(dir / "gpt2/config.json", config.dump());
  expect_mentions(error_of([&] { load_model(dir / "gpt2", {}); }),
                  {"config.json", "num_key_value_heads"});

  fs::remove(dir / "gpt2/config.json");
  expect_mentions(error_of([&] { load_model(dir / "gpt2", {}); }), {"gpt2", "config.json"});
}

TEST(LoaderErrors, GgufBadMagicAndTruncation) {
  TempDir dir;
  const ModelWeights weights = load_model("synthetic:tiny", {});
  llama_gguf(weights).save(dir / "magic.gguf", 0x12345678);
  expect_mentions(error_of([&] { load_model(dir / "magic.gguf", {}); }),
                  {dir / "magic.gguf", "magic"});

  llama_gguf(weights).save(dir / "cut.gguf");
  fs::resize_file(dir / "cut.gguf", fs::file_size(dir / "cut.gguf") - 64);
  expect_mentions(error_of([&] { load_model(dir / "cut.gguf", {}); }),
                  {dir / "cut.gguf", "output.weight", "truncated"});
  fs::resize_file(dir / "cut.gguf", 40);  // inside the first metadata value
  expect_mentions(error_of([&] { load_model(dir / "cut.gguf", {}); }),
                  {dir / "cut.gguf", "metadata", "truncated"});
}

TEST(LoaderErrors, GgufUnsupportedTypeMissingTensorAndArchitecture) {
  TempDir dir;
  const ModelWeights weights = load_model("synthetic:tiny", {});
  GgufChanges quantized;
  quantized.ggml_types["blk.1.ffn_gate.weight"] = 12;  // Q4_K
  llama_gguf(weights, quantized).save(dir / "q4k.gguf");
  expect_mentions(error_of([&] { load_model(dir / "q4k.gguf", {}); }),
                  {dir / "q4k.gguf", "blk.1.ffn_gate.weight", "Q4_K"});

  GgufChanges missing;
  missing.omitted.insert("blk.0.attn_k.weight");
  llama_gguf(weights, missing).save(dir / "missing.gguf");
  expect_mentions(error_of([&] { load_model(dir / "missing.gguf", {}); }),
                  {dir / "missing.gguf", "blk.0.attn_k.weight",
                   "model.layers.0.self_attn.k_proj.weight", "missing"});

  GgufWriter other;
  other.add_string("general.architecture", "mamba");
  other.save(dir / "mamba.gguf");
  expect_mentions(error_of([&] { load_model(dir / "mamba.gguf", {}); }),
                  {dir / "mamba.gguf", "mamba", "llama", "qwen2", "qwen3"});
}

TEST(LoaderErrors, Llama2cFileShorterThanItsHeaderSays) {
  TempDir dir;
  const std::vector<char> bytes = read_bytes(kStoriesBin);
  // Cut inside wv: header 28 + embeddings 512*64 + rms_att 5*64 + wq 5*64*64 + wk 5*32*64 floats.
  const size_t cut = 28 + 4 * (512 * 64 + 5 * 64 + 5 * 64 * 64 + 5 * 32 * 64) + 1000;
  write_bytes(dir / "short.bin", bytes.data(), cut);
  expect_mentions(error_of([&] { load_model(dir / "short.bin", {}); }),
                  {dir / "short.bin", "'wv'", "truncated"});
  write_bytes(dir / "header.bin", bytes.data(), 20);
  expect_mentions(error_of([&] { load_model(dir / "header.bin", {}); }),
                  {dir / "header.bin", "header"});
  std::vector<char> longer = bytes;
  longer.resize(bytes.size() + 8, '\0');
  write_bytes(dir / "long.bin", longer.data(), longer.size());
  expect_mentions(error_of([&] { load_model(dir / "long.bin", {}); }),
                  {dir / "long.bin", "header"});
}

TEST(LoaderErrors, MissingPathAndUnknownFormat) {
  TempDir dir;
  expect_mentions(error_of([&] { load_model(dir / "nothing.gguf", {}); }),
                  {dir / "nothing.gguf", "no such file"});
  write_text(dir / "weights.pt", "not a model");
  expect_mentions(error_of([&] { load_model(dir / "weights.pt", {}); }),
                  {dir / "weights.pt", "unknown model format"});
}

}  // namespace
}  // namespace tessera
