// A set of Unicode code points as sorted, disjoint ranges (a character class of a grammar or a
// regex), and its translation into the grammar's bytes: each range becomes alternatives of UTF-8
// byte sequences, one byte set per position.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/structured_output/grammar.h"

namespace tessera {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

class CodePointSet {
 public:
  struct Range {
    uint32_t first = 0, last = 0;  // inclusive
  };
  static CodePointSet all();  // every code point but the UTF-16 surrogates
  void add(uint32_t first, uint32_t last);
  void add(uint32_t code_point) { add(code_point, code_point); }
  void add(const CodePointSet& other);
  CodePointSet complement() const;  // within all()
  CodePointSet intersect(const CodePointSet& other) const;
  bool contains(uint32_t code_point) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<Range>& ranges() const {
    normalize();
    return ranges_;
  }

  // The set as grammar alternatives: one sequence of byte sets per run of UTF-8 encodings whose
  // bytes vary independently.
  std::vector<GrammarSequence> utf8_sequences(Grammar& grammar) const;
  // One element matching one character of the set: a byte set when every member is ASCII, else a
  // rule of the UTF-8 sequences.
  GrammarElement element(Grammar& grammar, std::string_view name) const;

 private:
  // Sorts and merges what add() appended (once, however many ranges a class lists).
  void normalize() const;

  mutable std::vector<Range> ranges_;
  mutable bool normalized_ = true;
};

// UTF-8 bytes of one code point (which must be at most kMaxCodePoint).
std::string utf8_encode(uint32_t code_point);
// Decodes the code point starting at text[position] and advances position; throws Error naming
// `what` when the text is not valid UTF-8 there.
uint32_t utf8_decode(std::string_view text, size_t& position, std::string_view what);

}  // namespace tessera
