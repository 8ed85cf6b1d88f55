// Fast reader for Hugging Face tokenizer.json: the model's vocab and merges (the bulk of the file:
// 150k entries each for Qwen3) are parsed straight into vectors; only the small rest of the
// document is built as a JSON tree.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::hf {

struct TokenizerJson {
  nlohmann::json document;  // the whole file except model.vocab (object form) and model.merges
  std::vector<std::pair<std::string, int64_t>> vocab;       // model.vocab, file order
  std::vector<std::pair<std::string, std::string>> merges;  // model.merges, by rank
  bool has_vocab = false;
  bool has_merges = false;
};

// Throws tessera::Error naming `path` when it cannot be read (input_file.h), is not valid JSON or
// nests deeper than kMaxJsonDepth.
TokenizerJson read_tokenizer_json(const std::string& path);

}  // namespace tessera::hf
