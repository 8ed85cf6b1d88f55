#include "models/tokenizer/added_tokens.h"

#include <cctype>

#include "models/tokenizer/text/unicode.h"

namespace tessera {
namespace {

// Rust's char::is_whitespace (the White_Space property), which HF uses for lstrip/rstrip.
bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// HF's single_word test treats alphanumerics and '_' as word characters; non-ASCII characters
// other than whitespace count as word characters here.
bool is_word_character(char32_t c) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) || c == '_';
  return !is_whitespace(c);
}

char32_t character_before(std::string_view text, size_t position) {
  size_t start = position;
  while (start > 0) {
    --start;
    if ((static_cast<unsigned char>(text[start]) & 0xC0) != 0x80) break;
  }
  return unicode::decode_utf8(text, start);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                                     const std::vector<std::string>& patterns) {
  nodes_.emplace_back();  // the root
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& pattern = patterns[i];
    if (pattern.empty()) continue;
    int32_t node = 0;
    for (const char character : pattern) {
      const auto byte = static_cast<unsigned char>(character);
      int32_t child = -1;
      for (const auto& [edge, target] : nodes_[node].children) {
        if (edge == byte) child = target;
      }
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[node].children.emplace_back(byte, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    // The same text twice: the first token keeps it.
    if (nodes_[node].rule < 0) {
      nodes_[node].rule = static_cast<int32_t>(tokens_.size());
      tokens_.push_back({tokens[i].id, tokens[i].lstrip, tokens[i].rstrip, tokens[i].single_word});
    }
    can_start_[static_cast<unsigned char>(pattern[0])] = true;
  }
}

std::pair<size_t, int32_t> AddedTokenMatcher::longest_match(std::string_view text,
                                                            size_t position) const {
  size_t best_length = 0;
  int32_t best_rule = -1;
  int32_t node = 0;
  for (size_t i = position; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int32_t child = -1;
    for (const auto& [edge, target] : nodes_[node].children) {
      if (edge == byte) child = target;
    }
    if (child < 0) break;
    node = child;
    if (nodes_[node].rule >= 0) {
      best_length = i + 1 - position;
      best_rule = nodes_[node].rule;
    }
  }
  return {best_length, best_rule};
}

std::vector<AddedTokenMatcher::Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t text_start = 0;  // start of the plain text not yet emitted
  for (size_t position = 0; position < text.size() && !tokens_.empty(); ++position) {
    if (!can_start_[static_cast<unsigned char>(text[position])]) continue;
    const auto [length, rule_index] = longest_match(text, position);
    if (length == 0) continue;
    const TokenRule& rule = tokens_[rule_index];
    size_t begin = position, end = position + length;
    if (rule.single_word) {
      size_t after = end;
      const bool starts_word = begin == 0 || !is_word_character(character_before(text, begin));
      const bool ends_word =
          end == text.size() || !is_word_character(unicode::decode_utf8(text, after));
      if (!starts_word || !ends_word) continue;
    }
    if (rule.lstrip) {
      while (begin > text_start) {
        size_t previous = begin;
        while (previous > text_start) {
          --previous;
          if ((static_cast<unsigned char>(text[previous]) & 0xC0) != 0x80) break;
        }
        size_t cursor = previous;
        if (!is_whitespace(unicode::decode_utf8(text, cursor))) break;
        begin = previous;
      }
    }
    if (rule.rstrip) {
      while (end < text.size()) {
        size_t next = end;
        if (!is_whitespace(unicode::decode_utf8(text, next))) break;
        end = next;
      }
    }
    if (begin > text_start) segments.push_back({text_start, begin, -1});
    segments.push_back({begin, end, rule.id});
    text_start = end;
    position = end - 1;  // the loop's ++ moves to `end`
  }
  if (text_start < text.size()) segments.push_back({text_start, text.size(), -1});
  return segments;
}

}  // namespace tessera
