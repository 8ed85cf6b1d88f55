#include "engine/structured_output/code_point_set.h"

#include <algorithm>

#include "runtime/check.h"

namespace tessera {
namespace {

constexpr uint32_t kSurrogateFirst = 0xD800, kSurrogateLast = 0xDFFF;

size_t utf8_length(uint32_t code_point) {
  return code_point < 0x80 ? 1 : code_point < 0x800 ? 2 : code_point < 0x10000 ? 3 : 4;
}

// Appends the byte-set sequences of [first, last], a range whose members all have the same UTF-8
// length, splitting it until each byte position covers one contiguous range of bytes.
void append_sequences(Grammar& grammar, uint32_t first, uint32_t last,
                      std::vector<GrammarSequence>& out) {
  const size_t length = utf8_length(first);
  for (size_t trailing = 1; trailing < length; ++trailing) {
    const uint32_t low_bits = (1u << (6 * trailing)) - 1;
    if ((first & ~low_bits) == (last & ~low_bits)) continue;
    if ((first & low_bits) != 0) {
      append_sequences(grammar, first, first | low_bits, out);
      append_sequences(grammar, (first | low_bits) + 1, last, out);
      return;
    }
    if ((last & low_bits) != low_bits) {
      append_sequences(grammar, first, (last & ~low_bits) - 1, out);
      append_sequences(grammar, last & ~low_bits, last, out);
      return;
    }
  }
  const std::string low = utf8_encode(first), high = utf8_encode(last);
  GrammarSequence sequence;
  for (size_t i = 0; i < low.size(); ++i) {
    ByteSet bytes;
    for (unsigned byte = static_cast<unsigned char>(low[i]);
         byte <= static_cast<unsigned char>(high[i]); ++byte)
      bytes.set(byte);
    sequence.push_back(grammar.byte_set(bytes));
  }
  out.push_back(std::move(sequence));
}

}  // namespace

std::string utf8_encode(uint32_t code_point) {
  TESSERA_CHECK(code_point <= kMaxCodePoint, "code point {} out of range", code_point);
  std::string bytes;
  if (code_point < 0x80) {
    bytes += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    bytes += static_cast<char>(0xC0 | (code_point >> 6));
    bytes += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    bytes += static_cast<char>(0xE0 | (code_point >> 12));
    bytes += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    bytes += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    bytes += static_cast<char>(0xF0 | (code_point >> 18));
    bytes += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    bytes += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    bytes += static_cast<char>(0x80 | (code_point & 0x3F));
  }
  return bytes;
}

uint32_t utf8_decode(std::string_view text, size_t& position, std::string_view what) {
  TESSERA_CHECK(position < text.size(), "utf8_decode past the end");
  const auto lead = static_cast<unsigned char>(text[position]);
  size_t length = lead < 0x80         ? 1
                  : (lead >> 5) == 6  ? 2
                  : (lead >> 4) == 14 ? 3
                  : (lead >> 3) == 30 ? 4
                                      : 0;
  TESSERA_REQUIRE(length > 0 && position + length <= text.size(), "{}: invalid UTF-8 at byte {}",
                  what, position);
  uint32_t code_point = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[position + i]);
    TESSERA_REQUIRE((next & 0xC0) == 0x80, "{}: invalid UTF-8 at byte {}", what, position + i);
    code_point = (code_point << 6) | (next & 0x3F);
  }
  TESSERA_REQUIRE(utf8_length(code_point) == length && code_point <= kMaxCodePoint &&
                      (code_point < kSurrogateFirst || code_point > kSurrogateLast),
                  "{}: invalid UTF-8 at byte {}", what, position);
  position += length;
  return code_point;
}

CodePointSet CodePointSet::all() {
  CodePointSet set;
  set.add(0, kSurrogateFirst - 1);
  set.add(kSurrogateLast + 1, kMaxCodePoint);
  return set;
}

void CodePointSet::add(uint32_t first, uint32_t last) {
  TESSERA_CHECK(first <= last && last <= kMaxCodePoint, "bad code point range {}..{}", first, last);
  ranges_.push_back({first, last});
  normalized_ = false;
}

void CodePointSet::normalize() const {
  if (normalized_) return;
  std::sort(ranges_.begin(), ranges_.end(),
            [](const Range& a, const Range& b) { return a.first < b.first; });
  std::vector<Range> merged;
  for (const Range& range : ranges_) {
    if (!merged.empty() && range.first <= merged.back().last + 1)
      merged.back().last = std::max(merged.back().last, range.last);
    else
      merged.push_back(range);
  }
  ranges_ = std::move(merged);
  normalized_ = true;
}

void CodePointSet::add(const CodePointSet& other) {
  for (const Range& range : other.ranges()) add(range.first, range.last);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet result;
  uint32_t next = 0;
  for (const Range& range : ranges()) {
    if (range.first > next) result.add(next, range.first - 1);
    next = range.last + 1;
  }
  if (next <= kMaxCodePoint) result.add(next, kMaxCodePoint);
  return result.intersect(all());
}

CodePointSet CodePointSet::intersect(const CodePointSet& other) const {
  // Both sorted and disjoint: one pass over each.
  CodePointSet result;
  const std::vector<Range>& a = ranges();
  const std::vector<Range>& b = other.ranges();
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const uint32_t first = std::max(a[i].first, b[j].first), last = std::min(a[i].last, b[j].last);
    if (first <= last) result.add(first, last);
    if (a[i].last < b[j].last)
      ++i;
    else
      ++j;
  }
  return result;
}

bool CodePointSet::contains(uint32_t code_point) const {
  const std::vector<Range>& sorted = ranges();
  auto after = std::upper_bound(sorted.begin(), sorted.end(), code_point,
                                [](uint32_t c, const Range& range) { return c < range.first; });
  return after != sorted.begin() && std::prev(after)->last >= code_point;
}

std::vector<GrammarSequence> CodePointSet::utf8_sequences(Grammar& grammar) const {
  std::vector<GrammarSequence> sequences;
  const uint32_t length_ends[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (const Range& range : ranges()) {
    uint32_t first = range.first;
    for (uint32_t end : length_ends) {
      if (first > range.last) break;
      if (first > end) continue;
      const uint32_t last = std::min(range.last, end);
      append_sequences(grammar, first, last, sequences);
      first = last + 1;
    }
  }
  // One byte set for all the one-byte characters: fewer alternatives, fewer automaton stacks.
  ByteSet single_bytes;
  std::vector<GrammarSequence> merged;
  for (GrammarSequence& sequence : sequences) {
    if (sequence.size() == 1 && sequence.front().kind == GrammarElement::Kind::byte_set)
      single_bytes |= grammar.byte_sets()[static_cast<size_t>(sequence.front().index)];
    else
      merged.push_back(std::move(sequence));
  }
  if (single_bytes.any()) merged.insert(merged.begin(), {grammar.byte_set(single_bytes)});
  return merged;
}

GrammarElement CodePointSet::element(Grammar& grammar, std::string_view name) const {
  const std::vector<Range>& sorted = ranges();
  if (!sorted.empty() && sorted.back().last < 0x80) {
    ByteSet bytes;
    for (const Range& range : sorted)
      for (uint32_t c = range.first; c <= range.last; ++c) bytes.set(c);
    return grammar.byte_set(bytes);
  }
  return grammar.choice(name, utf8_sequences(grammar));
}

}  // namespace tessera
