#include "engine/structured_output/syntax_reader.h"

#include <fmt/format.h>

#include "engine/structured_output/code_point_set.h"

namespace tessera {

bool SyntaxReader::parse_class_opening() {
  ++position_;  // [
  if (peek() != '^') return false;
  ++position_;
  return true;
}

uint32_t SyntaxReader::parse_hex(int digits) {
  uint32_t value = 0;
  for (int i = 0; i < digits; ++i) {
    const char c = peek();
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) fail(fmt::format("expected {} hex digits", digits));
    value = value * 16 + static_cast<uint32_t>(digit);
    ++position_;
  }
  if (value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF))
    fail(fmt::format("the escape names U+{:X}, which is not a character", value));
  return value;
}

std::optional<Repetition> SyntaxReader::parse_repetition() {
  const char c = peek();
  if (c == '*' || c == '+' || c == '?') {
    ++position_;
    if (c == '*') return Repetition{0, std::nullopt};
    if (c == '+') return Repetition{1, std::nullopt};
    return Repetition{0, 1};
  }
  if (c != '{') return std::nullopt;
  ++position_;
  Repetition repetition{parse_count(), std::nullopt};
  repetition.max = repetition.min;
  if (peek() == ',') {
    ++position_;
    repetition.max.reset();
    if (peek() != '}') repetition.max = parse_count();
  }
  if (peek() != '}') fail("an unclosed '{'");
  ++position_;
  return repetition;
}

int64_t SyntaxReader::parse_count() {
  int64_t value = 0;
  const size_t start = position_;
  while (peek() >= '0' && peek() <= '9') {
    value = value * 10 + (peek() - '0');
    if (value > Grammar::kMaxRepetition)
      fail(fmt::format("a repetition count above {} is too large", Grammar::kMaxRepetition));
    ++position_;
  }
  if (position_ == start) fail("expected a repetition count");
  return value;
}

}  // namespace tessera
