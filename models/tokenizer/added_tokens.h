// Added tokens (special tokens such as <|im_end|>, <s>, and user-added ones) are cut out of the
// text before normalization and BPE, as Hugging Face's AddedVocabulary does: leftmost match
// first, the longest token at that position, honoring lstrip/rstrip/single_word.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;      // skipped by decode(skip_special = true)
  bool normalized = false;   // matched against normalized text instead of the raw text
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // matched only where it is not part of a longer word
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is the text matched for tokens[i] (its content, normalized when it is a
  // normalized token). Empty patterns are ignored.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                    const std::vector<std::string>& patterns);

  struct Segment {
    size_t begin, end;  // byte range in the text
    int32_t token_id;   // -1: plain text to tokenize; otherwise the added token's id
  };
  // Splits `text` into plain-text segments and added-token segments, in order, covering it.
  std::vector<Segment> split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

 private:
  struct TokenRule {
    int32_t id;
    bool lstrip, rstrip, single_word;
  };
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t rule = -1;  // index into tokens_ when a pattern ends here
  };
  // The longest pattern starting at text[position]: its length and rule, or length 0.
  std::pair<size_t, int32_t> longest_match(std::string_view text, size_t position) const;

  std::vector<TokenRule> tokens_;
  std::vector<Node> nodes_;
  std::array<bool, 256> can_start_{};
};

}  // namespace tessera
