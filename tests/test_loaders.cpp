// Weight loaders: the real stories260K checkpoint in its three forms (llama2.c .bin, GGUF, HF
// safetensors folder) loads to the same tensors; synthetic models are deterministic and shaped
// by their configs; HF folders (sharded, Qwen2/Qwen3) and GGUF files written here round-trip;
// corrupt files fail with messages naming the file and the tensor or field.
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

#include "kernels/backend.h"
#include "kernels/check.h"
#include "models/architecture_registry.h"
#include "models/loaders/expected_weights.h"
#include "models/loaders/gguf.h"
#include "models/loaders/loaders.h"
#include "models/loaders/safetensors.h"
#include "models/loaders/synthetic.h"
#include "models/model_weights.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using loaders::GgufFile;

const std::string kModels = std::string(TESSERA_SHARED_DIR) + "/models";
const std::string kStoriesBin = kModels + "/stories260K/stories260K.bin";
const std::string kStoriesGguf = kModels + "/stories260K/stories260K.gguf";
const std::string kStoriesHf = kModels + "/stories260K-hf";

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / fmt::format("tessera_loaders_{}_{}_{}", ::getpid(),
                                                    test->test_suite_name(), test->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error thrown)";
}

void expect_mentions(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void write_text(const std::string& path, const std::string& text) {
  write_bytes(path, text.data(), text.size());
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const Tensor left = a.to(kCPU).contiguous();
  const Tensor right = b.to(kCPU).contiguous();
  return std::memcmp(left.data_ptr(), right.data_ptr(), left.nbytes()) == 0;
}

void expect_same_tensors(const ModelWeights& expected, const ModelWeights& actual) {
  ASSERT_EQ(expected.tensors.size(), actual.tensors.size())
      << expected.source << " vs " << actual.source;
  for (const auto& [name, tensor] : expected.tensors) {
    ASSERT_TRUE(actual.has(name)) << name << " missing from " << actual.source;
    EXPECT_TRUE(bit_identical(tensor, actual.get(name)))
        << name << ": " << expected.source << " differs from " << actual.source;
  }
}

// Every field but max_position_embeddings, which the GGUF converter sets to its own 2048.
void expect_same_architecture(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_FLOAT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.hidden_act, b.hidden_act);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.checkpoint_dtype, b.checkpoint_dtype);
}

// config.json for a ModelConfig, as transformers writes it.
nlohmann::json hf_config_json(const ModelConfig& config) {
  nlohmann::json json = {{"architectures", {config.architecture}},
                         {"vocab_size", config.vocab_size},
                         {"hidden_size", config.hidden_size},
                         {"intermediate_size", config.intermediate_size},
                         {"num_hidden_layers", config.num_layers},
                         {"num_attention_heads", config.num_heads},
                         {"num_key_value_heads", config.num_kv_heads},
                         {"head_dim", config.head_dim},
                         {"max_position_embeddings", config.max_position_embeddings},
                         {"rms_norm_eps", config.rms_norm_eps},
                         {"rope_theta", config.rope_theta},
                         {"rope_scaling", nullptr},
                         {"tie_word_embeddings", config.tie_word_embeddings},
                         {"hidden_act", config.hidden_act},
                         {"bos_token_id", config.bos_token_id},
                         {"eos_token_id", config.eos_token_ids},
                         {"torch_dtype", "float32"}};
  if (config.rope_scaling.type == "llama3")
    json["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", config.rope_scaling.factor},
        {"low_freq_factor", config.rope_scaling.low_freq_factor},
        {"high_freq_factor", config.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", config.rope_scaling.original_max_position_embeddings}};
  return json;
}

// An HF folder holding `weights` in one model.safetensors.
void write_hf_folder(const std::string& folder, const ModelWeights& weights,
                     const nlohmann::json& config) {
  fs::create_directories(folder);
  write_text(folder + "/config.json", config.dump(2));
  std::vector<std::pair<std::string, Tensor>> tensors(weights.tensors.begin(),
                                                      weights.tensors.end());
  loaders::save_safetensors(folder + "/model.safetensors", tensors);
}

// ---- A minimal GGUF writer, for round trips and corrupt files ----

class GgufWriter {
 public:
  void add_string(const std::string& key, const std::string& value) {
    key_header(key, 8);
    string(value);
  }
  void add_u32(const std::string& key, uint32_t value) {
    key_header(key, 4);
    pod(value);
  }
  void add_f32(const std::string& key, float value) {
    key_header(key, 6);
    pod(value);
  }
  void add_strings(const std::string& key, const std::vector<std::string>& values) {
    key_header(key, 9);
    pod(uint32_t{8});
    pod(uint64_t{values.size()});
    for (const std::string& value : values) string(value);
  }
  void add_f32s(const std::string& key, const std::vector<float>& values) {
    key_header(key, 9);
    pod(uint32_t{6});
    pod(uint64_t{values.size()});
    for (float value : values) pod(value);
  }
  // Row-major shape; written fastest-first. `ggml_type` overrides the type id written.
  void add_tensor(const std::string& name, const Tensor& tensor, uint32_t ggml_type = 0) {
    if (omitted_.count(name)) return;
    if (auto it = types_.find(name); it != types_.end()) ggml_type = it->second;
    const Tensor host = tensor.to(kCPU).contiguous();
    tensors_.push_back({name, host, ggml_type});
  }
  void apply(const std::map<std::string, uint32_t>& types, const std::set<std::string>& omitted) {
    types_ = types;
    omitted_ = omitted;
  }
  void save(const std::string& path, uint32_t magic = 0x46554747) const {
    std::string out;
    auto put = [&](const void* data, size_t size) {
      out.append(static_cast<const char*>(data), size);
    };
    const uint32_t version = 3;
    const uint64_t tensor_count = tensors_.size();
    put(&magic, 4);
    put(&version, 4);
    put(&tensor_count, 8);
    put(&kv_count_, 8);
    out += kvs_;
    uint64_t offset = 0;
    for (const auto& entry : tensors_) {
      const uint64_t length = entry.name.size();
      put(&length, 8);
      out += entry.name;
      const uint32_t dims = static_cast<uint32_t>(entry.tensor.dim());
      put(&dims, 4);
      for (int64_t d = entry.tensor.dim() - 1; d >= 0; --d) {
        const uint64_t size = static_cast<uint64_t>(entry.tensor.size(d));
        put(&size, 8);
      }
      put(&entry.type, 4);
      put(&offset, 8);
      offset += (entry.tensor.nbytes() + 31) / 32 * 32;
    }
    out.append((32 - out.size() % 32) % 32, '\0');
    for (const auto& entry : tensors_) {
      put(entry.tensor.data_ptr(), entry.tensor.nbytes());
      out.append((32 - out.size() % 32) % 32, '\0');
    }
    write_bytes(path, out.data(), out.size());
  }

 private:
  struct Entry {
    std::string name;
    Tensor tensor;
    uint32_t type;
  };
  template <typename T>
  void pod(T value) {
    kvs_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void string(const std::string& value) {
    pod(uint64_t{value.size()});
    kvs_ += value;
  }
  void key_header(const std::string& key, uint32_t type) {
    string(key);
    pod(type);
    ++kv_count_;
  }
  std::string kvs_;
  uint64_t kv_count_ = 0;
  std::vector<Entry> tensors_;
  std::map<std::string, uint32_t> types_;
  std::set<std::string> omitted_;
};

// q/k rows from HF rotate_half order back to llama.cpp's adjacent pairs (its converter's permute).
Tensor to_rope_pairs(const Tensor& hf, int64_t head_dim) {
  const Tensor host = hf.to(kCPU).contiguous();
  Tensor pairs = Tensor::empty(host.sizes(), host.dtype(), kCPU);
  const int64_t rows = host.size(0);
  const size_t row_bytes = host.nbytes() / static_cast<size_t>(rows);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t stored = loaders::rope_pairs_source_row(row, head_dim);
    std::memcpy(static_cast<char*>(pairs.data_ptr()) + stored * row_bytes,
                static_cast<const char*>(host.data_ptr()) + row * row_bytes, row_bytes);
  }
  return pairs;
}

// How a test GGUF file departs from a faithful one.
struct GgufChanges {
  std::map<std::string, uint32_t> ggml_types;  // by GGUF name: the type id written
  std::set<std::string> omitted;               // GGUF names left out
};

// A GGUF file of a llama-architecture model holding `weights` the way llama.cpp stores them.
GgufWriter llama_gguf(const ModelWeights& weights, const GgufChanges& changes = {}) {
  const ModelConfig& config = weights.config;
  GgufWriter writer;
  writer.apply(changes.ggml_types, changes.omitted);
  writer.add_string("general.architecture", "llama");
  writer.add_u32("llama.embedding_length", static_cast<uint32_t>(config.hidden_size));
  writer.add_u32("llama.block_count", static_cast<uint32_t>(config.num_layers));
  writer.add_u32("llama.feed_forward_length", static_cast<uint32_t>(config.intermediate_size));
  writer.add_u32("llama.attention.head_count", static_cast<uint32_t>(config.num_heads));
  writer.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(config.num_kv_heads));
  writer.add_u32("llama.context_length", static_cast<uint32_t>(config.max_position_embeddings));
  writer.add_f32("llama.rope.freq_base", static_cast<float>(config.rope_theta));
  writer.add_f32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(config.rms_norm_eps));
  std::vector<std::string> tokens;
  for (int64_t i = 0; i < config.vocab_size; ++i) tokens.push_back(fmt::format("t{}", i));
  writer.add_string("tokenizer.ggml.model", "llama");
  writer.add_strings("tokenizer.ggml.tokens", tokens);
  writer.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(config.bos_token_id));
  writer.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(config.eos_token_ids[0]));
  writer.add_tensor("token_embd.weight", weights.get("model.embed_tokens.weight"));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    auto hf = [&](const char* name) {
      return weights.get(fmt::format("model.layers.{}.{}", layer, name));
    };
    auto gguf = [&](const char* name) { return fmt::format("blk.{}.{}", layer, name); };
    writer.add_tensor(gguf("attn_norm.weight"), hf("input_layernorm.weight"));
    writer.add_tensor(gguf("attn_q.weight"),
                      to_rope_pairs(hf("self_attn.q_proj.weight"), config.head_dim));
    writer.add_tensor(gguf("attn_k.weight"),
                      to_rope_pairs(hf("self_attn.k_proj.weight"), config.head_dim));
    writer.add_tensor(gguf("attn_v.weight"), hf("self_attn.v_proj.weight"));
    writer.add_tensor(gguf("attn_output.weight"), hf("self_attn.o_proj.weight"));
    writer.add_tensor(gguf("ffn_norm.weight"), hf("post_attention_layernorm.weight"));
    writer.add_tensor(gguf("ffn_gate.weight"), hf("mlp.gate_proj.weight"));
    writer.add_tensor(gguf("ffn_down.weight"), hf("mlp.down_proj.weight"));
    writer.add_tensor(gguf("ffn_up.weight"), hf("mlp.up_proj.weight"));
  }
  writer.add_tensor("output_norm.weight", weights.get("model.norm.weight"));
  if (!config.tie_word_embeddings)
    writer.add_tensor("output.weight", weights.get("lm_head.weight"));
  return writer;
}

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

TEST(SyntheticLoad, UnknownNameListsTheKnownOnes) {
  expect_mentions(error_of([] { load_model("synthetic:gpt5", {}); }),
                  {"synthetic:gpt5", "tiny", "llama-1b", "qwen3-tiny", "qwen2-tiny"});
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
  write_header(dir / "fp8.safetensors",
               R"({"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4);
  const loaders::SafetensorsFile fp8(dir / "fp8.safetensors");
  expect_mentions(error_of([&] { fp8.stored(*fp8.find("w")); }),
                  {"fp8.safetensors", "'w'", "F8_E4M3"});
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
