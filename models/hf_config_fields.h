// Typed, checked access to the fields of a Hugging Face config.json object; null counts as absent,
// as in transformers. Errors name the file and the field. The HF folder loader reads the common
// fields with it, and each architecture its own (models/architecture_registry.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/model_config.h"

namespace tessera {

class HfConfigFields {
 public:
  HfConfigFields(const nlohmann::json& object, std::string file)
      : object_(object), file_(std::move(file)) {}

  bool has(const char* key) const { return object_.contains(key) && !object_[key].is_null(); }
  // Present, possibly null: transformers reads an explicit null as "off" where an absent field
  // takes the class default (Gemma 2's softcaps).
  bool contains(const char* key) const { return object_.contains(key); }

  int64_t integer(const char* key) const;
  int64_t integer(const char* key, int64_t fallback) const;
  double number(const char* key, double fallback) const;
  bool boolean(const char* key, bool fallback) const;
  std::string text(const char* key, const std::string& fallback) const;
  std::vector<std::string> texts(const char* key) const;  // a list of strings; empty when absent
  // eos_token_id: one id or a list of ids.
  std::vector<int64_t> ids(const char* key) const;
  // A nested object (rope_parameters, ...), read with the same checks; throws unless an object.
  HfConfigFields object(const char* key) const;
  const nlohmann::json& raw(const char* key) const { return object_[key]; }
  const nlohmann::json& raw_object() const {
    return object_;
  }  // every key, for "unknown key" checks
  const std::string& file() const { return file_; }

 private:
  const nlohmann::json& object_;
  std::string file_;
};

// RoPE scaling from a rope_scaling / rope_parameters object: rope_type (or type; "default" is
// none), factor, llama3's low/high frequency factors and original_max_position_embeddings.
RopeScaling read_rope_scaling(const HfConfigFields& rope);

}  // namespace tessera
