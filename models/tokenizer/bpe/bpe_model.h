// Hugging Face's BPE model: a vocabulary and ranked merges. Encodes one pre-tokenized piece. Two
// flavors: byte-level (GPT-2, Llama-3, Qwen: the piece's bytes start as GPT-2's byte characters)
// and character-level with byte fallback (Llama-2/sentencepiece style: characters missing from
// the vocabulary become <0xNN> byte tokens).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/tokenizer/bpe/merge_table.h"
#include "models/tokenizer/token_index.h"

namespace tessera {

struct BpeModelOptions {
  bool byte_level = false;     // start from GPT-2's byte characters
  bool byte_fallback = false;  // unknown characters become <0xNN> tokens
  bool ignore_merges = false;  // a piece found whole in the vocabulary is one token (Llama-3)
  bool fuse_unk = false;       // consecutive unknown characters give one unk token
  std::optional<int32_t> unk_id;
};

class BpeModel {
 public:
  // `id_to_token[id]` is the token string of id ("" for ids the vocabulary skips); `merges` are
  // token string pairs, highest priority first. Throws naming `source` when a merge uses a token
  // the vocabulary lacks.
  BpeModel(std::vector<std::string> id_to_token,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeModelOptions options,
           const std::string& source);
  BpeModel(const BpeModel&) = delete;  // token_index_ points into id_to_token_
  BpeModel& operator=(const BpeModel&) = delete;
  BpeModel(BpeModel&&) = default;

  // Appends the ids of one piece (raw bytes for byte-level, normalized text otherwise).
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  std::optional<int32_t> find(std::string_view token) const;
  // The token string of an id, or nullptr when the id is outside the vocabulary.
  const std::string* token(int32_t id) const;
  size_t size() const { return id_to_token_.size(); }
  const BpeModelOptions& options() const { return options_; }

 private:
  void push_unknown(std::vector<int32_t>& symbols) const;

  std::vector<std::string> id_to_token_;
  TokenIndex token_index_;
  MergeTable merges_;
  BpeModelOptions options_;
  std::array<int32_t, 256> byte_ids_;           // byte-level: the id of each byte's character
  std::array<int32_t, 256> byte_fallback_ids_;  // the id of <0xNN>, -1 when absent
};

}  // namespace tessera
