// Model files for loader tests: the stories260K paths, a per-test temporary folder, byte and
// text writers, tensor and config comparisons, HF folders and a minimal GGUF writer (for round
// trips and corrupt files) written the way llama.cpp's converter writes a llama model.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "models/model_weights.h"
#include "support/error_of.h"

namespace tessera::testing {

inline const std::string kModels = std::string(TESSERA_SHARED_DIR) + "/models";
inline const std::string kStoriesBin = kModels + "/stories260K/stories260K.bin";
inline const std::string kStoriesGguf = kModels + "/stories260K/stories260K.gguf";
inline const std::string kStoriesHf = kModels + "/stories260K-hf";
// llama2.c's doc/stories260K.md: the start of stories260K's greedy sample (run.c -t 0.0).
inline const std::string kStoriesGreedy =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big, red ball.";

// A fresh directory per test (named after it), removed afterwards.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Expects every part in the message.
void expect_mentions(const std::string& message, std::initializer_list<std::string> parts);

// A file's bytes (throws naming it when it cannot be read), and files written from bytes or text.
std::vector<char> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const void* data, size_t size);
void write_text(const std::string& path, const std::string& text);

// Same dtype, sizes and bytes, wherever each tensor is.
bool bit_identical(const Tensor& a, const Tensor& b);
// The same tensor names, each bit-identical.
void expect_same_tensors(const ModelWeights& expected, const ModelWeights& actual);

// A tiny model's expected.json (tests/data/hf_tiny, tests/hf_reference/make_tiny_models.py): the
// input ids and transformers' logits at every position.
struct HfTinyExpected {
  std::vector<int32_t> input_ids;
  std::vector<std::vector<double>> logits;
};
HfTinyExpected read_hf_tiny_expected(const std::string& folder);

// Every field but max_position_embeddings, which the GGUF converter sets to its own 2048.
void expect_same_architecture(const ModelConfig& a, const ModelConfig& b);

// config.json for a ModelConfig, as transformers writes it.
nlohmann::json hf_config_json(const ModelConfig& config);

// An HF folder holding `weights` in one model.safetensors.
void write_hf_folder(const std::string& folder, const ModelWeights& weights,
                     const nlohmann::json& config);

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

// How a test GGUF file departs from a faithful one.
struct GgufChanges {
  std::map<std::string, uint32_t> ggml_types;  // by GGUF name: the type id written
  std::set<std::string> omitted;               // GGUF names left out
};

// q/k rows from HF rotate_half order back to llama.cpp's adjacent pairs (its converter's permute).
Tensor to_rope_pairs(const Tensor& hf, int64_t head_dim);

// A GGUF file of a llama-architecture model holding `weights` the way llama.cpp stores them.
GgufWriter llama_gguf(const ModelWeights& weights, const GgufChanges& changes = {});

}  // namespace tessera::testing
