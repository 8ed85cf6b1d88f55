#include "models/tokenizer/text/unicode.h"

#include <algorithm>
#include <vector>

#include "models/tokenizer/text/unicode_tables.h"

namespace tessera::unicode {
namespace {

constexpr char32_t kReplacementCharacter = 0xFFFD;

// Hangul syllables compose and decompose algorithmically (Unicode 3.12).
constexpr char32_t kHangulSyllableBase = 0xAC00, kLeadingBase = 0x1100, kVowelBase = 0x1161,
                   kTrailingBase = 0x11A7;
constexpr int kLeadingCount = 19, kVowelCount = 21, kTrailingCount = 28;
constexpr int kSyllablesPerLeading = kVowelCount * kTrailingCount;
constexpr int kSyllableCount = kLeadingCount * kSyllablesPerLeading;

// Decodes one strictly valid UTF-8 sequence at text[position]. Returns its length, or 0 when the
// bytes there are not valid UTF-8; then `invalid_length` is the maximal invalid subpart to skip.
size_t decode_strict(std::string_view text, size_t position, char32_t& code_point,
                     size_t& invalid_length) {
  const auto byte_at = [&](size_t i) { return static_cast<unsigned char>(text[position + i]); };
  const unsigned char lead = byte_at(0);
  invalid_length = 1;
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  }
  size_t length;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (size_t i = 1; i < length; ++i) {
    if (position + i >= text.size()) return 0;
    const unsigned char byte = byte_at(i);
    if (i == 1 ? (byte < low || byte > high) : (byte < 0x80 || byte > 0xBF)) return 0;
    code_point = (code_point << 6) | (byte & 0x3F);
    invalid_length = i + 1;
  }
  return length;
}

uint8_t combining_class(char32_t code_point) {
  if (code_point < 0x300) return 0;
  using unicode_tables::kCombiningClasses;
  const auto* end = kCombiningClasses + unicode_tables::kCombiningClassCount;
  const auto* it =
      std::upper_bound(kCombiningClasses, end, code_point,
                       [](char32_t value, const unicode_tables::CombiningClassRange& range) {
                         return value < range.first;
                       });
  if (it == kCombiningClasses) return 0;
  --it;
  return code_point <= it->last ? it->combining_class : 0;
}

const unicode_tables::Decomposition* find_decomposition(char32_t code_point) {
  using unicode_tables::kDecompositions;
  const auto* end = kDecompositions + unicode_tables::kDecompositionCount;
  const auto* it = std::lower_bound(kDecompositions, end, code_point,
                                    [](const unicode_tables::Decomposition& entry, char32_t value) {
                                      return entry.code_point < value;
                                    });
  return it != end && it->code_point == code_point ? it : nullptr;
}

void decompose_into(char32_t code_point, std::vector<char32_t>& out) {
  if (code_point >= kHangulSyllableBase && code_point < kHangulSyllableBase + kSyllableCount) {
    const int index = static_cast<int>(code_point - kHangulSyllableBase);
    out.push_back(kLeadingBase + index / kSyllablesPerLeading);
    out.push_back(kVowelBase + (index % kSyllablesPerLeading) / kTrailingCount);
    if (index % kTrailingCount != 0) out.push_back(kTrailingBase + index % kTrailingCount);
    return;
  }
  const auto* decomposition = code_point < 0xC0 ? nullptr : find_decomposition(code_point);
  if (decomposition == nullptr) {
    out.push_back(code_point);
    return;
  }
  decompose_into(decomposition->first, out);
  if (decomposition->second != 0) decompose_into(decomposition->second, out);
}

// The primary composite of (first, second), or 0 when they do not compose.
char32_t compose_pair(char32_t first, char32_t second) {
  if (first >= kLeadingBase && first < kLeadingBase + kLeadingCount && second >= kVowelBase &&
      second < kVowelBase + kVowelCount) {
    return kHangulSyllableBase +
           ((first - kLeadingBase) * kVowelCount + (second - kVowelBase)) * kTrailingCount;
  }
  if (first >= kHangulSyllableBase && first < kHangulSyllableBase + kSyllableCount &&
      (first - kHangulSyllableBase) % kTrailingCount == 0 && second > kTrailingBase &&
      second < kTrailingBase + kTrailingCount) {
    return first + (second - kTrailingBase);
  }
  using unicode_tables::kCompositions;
  const auto* end = kCompositions + unicode_tables::kCompositionCount;
  const auto* it = std::lower_bound(
      kCompositions, end, std::pair{first, second},
      [](const unicode_tables::Composition& entry, const std::pair<char32_t, char32_t>& value) {
        return std::pair{entry.first, entry.second} < value;
      });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

bool nfc_quick_check_yes(char32_t code_point) {
  if (code_point < 0x300) return true;
  using unicode_tables::kNotNfcQuickCheckYes;
  const auto* end = kNotNfcQuickCheckYes + unicode_tables::kNotNfcQuickCheckYesCount;
  const auto* it =
      std::upper_bound(kNotNfcQuickCheckYes, end, code_point,
                       [](char32_t value, const unicode_tables::CodePointRange& range) {
                         return value < range.first;
                       });
  if (it == kNotNfcQuickCheckYes) return true;
  --it;
  return code_point > it->last;
}

// A decoded character, or a byte that was not valid UTF-8 (kept as is).
struct Unit {
  char32_t code_point;
  bool raw_byte;
};

std::string normalize(std::string_view text, bool compose) {
  // Decompose, keeping invalid bytes as raw units that behave as starters.
  std::vector<Unit> units;
  units.reserve(text.size());
  std::vector<char32_t> decomposed;
  for (size_t position = 0; position < text.size();) {
    char32_t code_point;
    size_t invalid_length;
    const size_t length = decode_strict(text, position, code_point, invalid_length);
    if (length == 0) {
      for (size_t i = 0; i < invalid_length; ++i) {
        units.push_back({static_cast<unsigned char>(text[position + i]), true});
      }
      position += invalid_length;
      continue;
    }
    position += length;
    decomposed.clear();
    decompose_into(code_point, decomposed);
    for (char32_t part : decomposed) units.push_back({part, false});
  }
  const auto class_of = [](const Unit& unit) {
    return unit.raw_byte ? uint8_t{0} : combining_class(unit.code_point);
  };
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (size_t start = 0; start < units.size();) {
    if (class_of(units[start]) == 0) {
      ++start;
      continue;
    }
    size_t end = start;
    while (end < units.size() && class_of(units[end]) != 0) ++end;
    std::stable_sort(units.begin() + start, units.begin() + end,
                     [&](const Unit& a, const Unit& b) { return class_of(a) < class_of(b); });
    start = end;
  }
  if (compose && !units.empty()) {
    // Canonical composition: each character composes with the last starter unless a character
    // in between blocks it (same or higher combining class, or a starter).
    std::vector<Unit> composed;
    composed.reserve(units.size());
    size_t starter = SIZE_MAX;
    uint8_t last_class = 0;
    for (const Unit& unit : units) {
      const uint8_t unit_class = class_of(unit);
      if (starter != SIZE_MAX && !unit.raw_byte && !composed[starter].raw_byte) {
        const bool blocked =
            composed.size() - 1 != starter && (last_class == 0 || last_class >= unit_class);
        if (!blocked) {
          const char32_t composite = compose_pair(composed[starter].code_point, unit.code_point);
          if (composite != 0) {
            composed[starter].code_point = composite;
            continue;
          }
        }
      }
      if (unit_class == 0) starter = composed.size();
      last_class = unit_class;
      composed.push_back(unit);
    }
    units.swap(composed);
  }
  std::string out;
  out.reserve(text.size());
  for (const Unit& unit : units) {
    if (unit.raw_byte) {
      out.push_back(static_cast<char>(unit.code_point));
    } else {
      append_utf8(out, unit.code_point);
    }
  }
  return out;
}

}  // namespace

size_t utf8_sequence_length(unsigned char lead_byte) {
  if (lead_byte >= 0xF0 && lead_byte <= 0xF7) return 4;
  if (lead_byte >= 0xE0) return lead_byte <= 0xEF ? 3 : 1;
  if (lead_byte >= 0xC0) return 2;
  return 1;
}

char32_t decode_utf8(std::string_view text, size_t& position) {
  char32_t code_point;
  size_t invalid_length;
  const size_t length = decode_strict(text, position, code_point, invalid_length);
  if (length == 0) {
    ++position;
    return kReplacementCharacter;
  }
  position += length;
  return code_point;
}

void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

size_t incomplete_utf8_tail(std::string_view bytes) {
  // Look back at most 3 bytes for the lead byte of an unfinished sequence.
  for (size_t back = 1; back <= 3 && back <= bytes.size(); ++back) {
    const size_t start = bytes.size() - back;
    const auto byte = static_cast<unsigned char>(bytes[start]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for the lead
    if (utf8_sequence_length(byte) <= back) return 0;
    // The tail is a prefix of a valid sequence when strict decoding fails only for lack of bytes.
    char32_t code_point;
    size_t invalid_length;
    decode_strict(bytes, start, code_point, invalid_length);
    return invalid_length == back ? back : 0;
  }
  return 0;
}

std::string sanitize_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t position = 0; position < bytes.size();) {
    char32_t code_point;
    size_t invalid_length;
    const size_t length = decode_strict(bytes, position, code_point, invalid_length);
    if (length == 0) {
      append_utf8(out, kReplacementCharacter);
      position += invalid_length;
    } else {
      out.append(bytes.substr(position, length));
      position += length;
    }
  }
  return out;
}

bool is_valid_utf8(std::string_view bytes) {
  for (size_t position = 0; position < bytes.size();) {
    char32_t code_point;
    size_t invalid_length;
    const size_t length = decode_strict(bytes, position, code_point, invalid_length);
    if (length == 0) return false;
    position += length;
  }
  return true;
}

size_t count_code_points(std::string_view valid_utf8) {
  size_t count = 0;
  for (unsigned char byte : valid_utf8) count += (byte & 0xC0) != 0x80;
  return count;
}

bool is_nfc_quick(std::string_view text) {
  for (size_t position = 0; position < text.size();) {
    if (static_cast<unsigned char>(text[position]) < 0x80) {
      ++position;
      continue;
    }
    if (!nfc_quick_check_yes(decode_utf8(text, position))) return false;
  }
  return true;
}

std::string normalize_nfc(std::string_view text) {
  return is_nfc_quick(text) ? std::string(text) : normalize(text, /*compose=*/true);
}

std::string normalize_nfd(std::string_view text) {
  return normalize(text, /*compose=*/false);
}

const std::array<std::string, 256>& byte_to_char_utf8() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> mapping;
    int next_unprintable = 0;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                             (byte >= 0xAE && byte <= 0xFF);
      const char32_t code_point = printable ? byte : 256 + next_unprintable++;
      append_utf8(mapping[byte], code_point);
    }
    return mapping;
  }();
  return table;
}

int char_to_byte(char32_t code_point) {
  static const std::vector<int> table = [] {
    std::vector<int> reverse(512, -1);
    const auto& forward = byte_to_char_utf8();
    for (int byte = 0; byte < 256; ++byte) {
      size_t position = 0;
      reverse[decode_utf8(forward[byte], position)] = byte;
    }
    return reverse;
  }();
  return code_point < table.size() ? table[code_point] : -1;
}

}  // namespace tessera::unicode
