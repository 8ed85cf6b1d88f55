// What the grammar-text and regex parsers read alike: a position in a text, hex escapes, and
// repetition postfixes (* + ? {m} {m,} {m,n}). Each parser says where it failed its own way.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

struct Repetition {
  int64_t min = 0;
  std::optional<int64_t> max;  // empty: unbounded
};

class SyntaxReader {
 protected:
  SyntaxReader(std::string_view text, std::string_view field) : text_(text), field_(field) {}
  virtual ~SyntaxReader() = default;

  bool at_end() const { return position_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[position_]; }
  // Throws Error naming the field, `what` and where in the text.
  [[noreturn]] virtual void fail(std::string_view what) const = 0;

  // The opening of a character class, '[' and an optional '^' (consumed): whether it negates.
  bool parse_class_opening();
  // `digits` hex digits, a code point (a surrogate or a value past U+10FFFF is refused).
  uint32_t parse_hex(int digits);
  // A repetition postfix at the position (consumed), or none (nothing consumed). Bounds are
  // checked against Grammar::kMaxRepetition.
  std::optional<Repetition> parse_repetition();

  std::string_view text_;
  std::string_view field_;
  size_t position_ = 0;

 private:
  int64_t parse_count();
};

}  // namespace tessera
