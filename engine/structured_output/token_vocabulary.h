// A tokenizer's vocabulary as the grammar masks walk it: the bytes of every token that stands for
// text, in a trie laid out in depth-first order (each node: its byte, its depth, where its subtree
// ends), so one pass over an array visits every token and skips a whole subtree as soon as the
// grammar rejects its prefix. Special tokens (<s>, <|im_end|>) and tokens of no text are left
// out: a grammar never allows them, only the end tokens where it may end. Built once per model.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer.h"

namespace tessera {

class TokenVocabulary {
 public:
  // `logits_width`: the model's vocabulary (logits per row).
  TokenVocabulary(const Tokenizer& tokenizer, int64_t logits_width);

  int64_t logits_width() const { return logits_width_; }
  // 32-bit words of one row's token mask.
  int64_t mask_words() const { return (logits_width_ + 31) / 32; }
  size_t num_nodes() const { return bytes_.size(); }
  uint8_t byte(size_t node) const { return bytes_[node]; }
  uint16_t depth(size_t node) const { return depths_[node]; }
  size_t subtree_end(size_t node) const { return static_cast<size_t>(subtree_ends_[node]); }
  // The tokens whose bytes end at `node`.
  std::span<const int32_t> tokens_at(size_t node) const {
    return std::span<const int32_t>(token_ids_)
        .subspan(static_cast<size_t>(token_starts_[node]),
                 static_cast<size_t>(token_starts_[node + 1] - token_starts_[node]));
  }
  // Ids with bytes: the tokenizer's vocabulary (the logits may be wider).
  size_t num_token_ids() const { return token_bytes_.size(); }
  // The bytes of a text token (empty for one left out).
  const std::string& token_bytes(int32_t id) const {
    return token_bytes_.at(static_cast<size_t>(id));
  }
  size_t max_depth() const { return max_depth_; }
  // The bytes from the trie's root to `node`, its own byte last.
  std::string_view path(size_t node) const {
    return std::string_view(token_bytes_[static_cast<size_t>(first_tokens_[node])])
        .substr(0, depths_[node]);
  }

 private:
  int64_t logits_width_ = 0;
  std::vector<std::string> token_bytes_;
  std::vector<uint8_t> bytes_;
  std::vector<uint16_t> depths_;
  std::vector<int32_t> subtree_ends_;
  std::vector<int32_t> first_tokens_;  // per node: a token whose bytes pass through it
  std::vector<int32_t> token_starts_;  // CSR over nodes into token_ids_
  std::vector<int32_t> token_ids_;
  size_t max_depth_ = 0;
};

}  // namespace tessera
