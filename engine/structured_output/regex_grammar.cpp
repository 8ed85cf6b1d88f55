#include "engine/structured_output/regex_grammar.h"

#include <fmt/format.h>

#include "engine/structured_output/code_point_set.h"
#include "engine/structured_output/syntax_reader.h"
#include "runtime/check.h"

namespace tessera {
namespace {

CodePointSet class_of(std::initializer_list<std::pair<uint32_t, uint32_t>> ranges) {
  CodePointSet set;
  for (auto [first, last] : ranges) set.add(first, last);
  return set;
}
const CodePointSet& digits() {
  static const CodePointSet set = class_of({{'0', '9'}});
  return set;
}
const CodePointSet& word_chars() {
  static const CodePointSet set = class_of({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
  return set;
}
const CodePointSet& space_chars() {
  static const CodePointSet set = class_of({{'\t', '\r'}, {' ', ' '}});
  return set;
}

class RegexParser : SyntaxReader {
 public:
  RegexParser(Grammar& grammar, std::string_view pattern, RegexText text, std::string_view field)
      : SyntaxReader(pattern, field), grammar_(grammar), pattern_(pattern), mode_(text) {}

  GrammarElement parse() {
    if (peek() == '^') ++position_;
    std::vector<GrammarSequence> alternatives = parse_alternation();
    if (!at_end()) fail(peek() == ')' ? "an unmatched ')'" : "unexpected text");
    return grammar_.choice("regex", std::move(alternatives));
  }

 private:
  [[noreturn]] void fail(std::string_view what) const override {
    throw Error(fmt::format("{}: {} at character {} of the regular expression \"{}\"", field_, what,
                            position_, pattern_));
  }

  std::vector<GrammarSequence> parse_alternation() {
    if (++nesting_ > kMaxNesting) fail("groups nested too deeply");
    std::vector<GrammarSequence> alternatives{parse_concatenation()};
    while (peek() == '|') {
      ++position_;
      alternatives.push_back(parse_concatenation());
    }
    --nesting_;
    return alternatives;
  }

  GrammarSequence parse_concatenation() {
    GrammarSequence sequence;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && position_ + 1 == pattern_.size()) {
        ++position_;  // the end of the text: it is the end of the match anyway
        break;
      }
      GrammarElement atom = parse_atom();
      parse_quantifier(atom, sequence);
    }
    return sequence;
  }

  GrammarElement parse_atom() {
    const char c = peek();
    if (c == '(') {
      ++position_;
      if (peek() == '?') {
        if (pattern_.substr(position_, 2) != "?:")
          fail("lookaround and named groups are not supported");
        position_ += 2;
      }
      std::vector<GrammarSequence> alternatives = parse_alternation();
      if (peek() != ')') fail("an unclosed '('");
      ++position_;
      return grammar_.choice("group", std::move(alternatives));
    }
    if (c == '[') return characters(parse_class());
    if (c == '.') {
      ++position_;
      CodePointSet any = CodePointSet::all();
      return characters(any.intersect(class_of({{0, '\n' - 1}, {'\n' + 1, kMaxCodePoint}})));
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("a quantifier with nothing before it");
    if (c == '^' || c == '$') fail("'^' and '$' are supported only at the ends");
    if (c == '\\') return characters(parse_escape(false));
    CodePointSet one;
    one.add(utf8_decode(pattern_, position_, field_));
    return characters(one);
  }

  // \d and friends, or one escaped character; in a class, \b is a backspace.
  CodePointSet parse_escape(bool in_class) {
    ++position_;
    if (at_end()) fail("a '\\' at the end");
    const char c = pattern_[position_++];
    CodePointSet set;
    switch (c) {
      case 'd':
        return digits();
      case 'D':
        return digits().complement();
      case 'w':
        return word_chars();
      case 'W':
        return word_chars().complement();
      case 's':
        return space_chars();
      case 'S':
        return space_chars().complement();
      case 'n':
        set.add('\n');
        return set;
      case 'r':
        set.add('\r');
        return set;
      case 't':
        set.add('\t');
        return set;
      case 'f':
        set.add('\f');
        return set;
      case 'v':
        set.add('\v');
        return set;
      case '0':
        set.add(0);
        return set;
      case 'x':
        set.add(parse_hex(2));
        return set;
      case 'u':
        set.add(parse_hex(4));
        return set;
      case 'b':
        if (in_class) {
          set.add('\b');
          return set;
        }
        fail("word boundaries (\\b) are not supported");
      default:
        if (c >= '1' && c <= '9') fail("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
          fail(fmt::format("the escape '\\{}' is not supported", c));
        --position_;
        set.add(utf8_decode(pattern_, position_, field_));
        return set;
    }
  }

  CodePointSet parse_class() {
    const bool negated = parse_class_opening();
    CodePointSet set;
    bool first_item = true;
    while (first_item || peek() != ']') {
      if (at_end()) fail("an unclosed '['");
      first_item = false;
      CodePointSet item =
          peek() == '\\' ? parse_escape(true) : single(utf8_decode(pattern_, position_, field_));
      if (peek() == '-' && position_ + 1 < pattern_.size() && pattern_[position_ + 1] != ']' &&
          item.ranges().size() == 1 && item.ranges()[0].first == item.ranges()[0].last) {
        ++position_;
        CodePointSet end =
            peek() == '\\' ? parse_escape(true) : single(utf8_decode(pattern_, position_, field_));
        if (end.ranges().size() != 1 || end.ranges()[0].first != end.ranges()[0].last ||
            end.ranges()[0].first < item.ranges()[0].first)
          fail("a bad character range");
        item.add(item.ranges()[0].first, end.ranges()[0].first);
      }
      set.add(item);
    }
    ++position_;  // ]
    return negated ? set.complement() : set;
  }
  static CodePointSet single(uint32_t code_point) {
    CodePointSet set;
    set.add(code_point);
    return set;
  }

  // One character of `set` as the text writes it.
  GrammarElement characters(const CodePointSet& set) {
    if (mode_ == RegexText::raw) return set.element(grammar_, "chars");
    // Inside a JSON string: what may stand for itself, and the rest escaped.
    CodePointSet plain =
        set.intersect(class_of({{0x20, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, kMaxCodePoint}}));
    std::vector<GrammarSequence> alternatives = plain.utf8_sequences(grammar_);
    auto add_escaped = [&](uint32_t code_point, std::string_view escaped) {
      if (set.contains(code_point)) alternatives.push_back(grammar_.literal(escaped));
    };
    add_escaped('"', "\\\"");
    add_escaped('\\', "\\\\");
    add_escaped('\n', "\\n");
    add_escaped('\r', "\\r");
    add_escaped('\t', "\\t");
    add_escaped('\b', "\\b");
    add_escaped('\f', "\\f");
    for (uint32_t c = 0; c < 0x20; ++c)
      if (c != '\n' && c != '\r' && c != '\t' && c != '\b' && c != '\f')
        add_escaped(c, fmt::format("\\u{:04x}", c));
    if (alternatives.size() == 1 && alternatives[0].size() == 1) return alternatives[0][0];
    return grammar_.choice("chars", std::move(alternatives));
  }

  void parse_quantifier(GrammarElement atom, GrammarSequence& sequence) {
    const std::optional<Repetition> repetition = parse_repetition();
    if (!repetition) {
      sequence.push_back(atom);
      return;
    }
    if (peek() == '?') ++position_;  // lazy: the same language
    if (peek() == '*' || peek() == '+' || peek() == '{') fail("a quantifier after a quantifier");
    sequence.push_back(grammar_.repeat(atom, repetition->min, repetition->max, field_));
  }

  static constexpr int kMaxNesting = 256;
  Grammar& grammar_;
  std::string_view pattern_;
  RegexText mode_;
  int nesting_ = 0;
};

}  // namespace

GrammarElement regex_element(Grammar& grammar, std::string_view pattern, RegexText text,
                             std::string_view field) {
  return RegexParser(grammar, pattern, text, field).parse();
}

Grammar regex_grammar(std::string_view pattern, std::string_view field) {
  Grammar grammar;
  const int32_t root = grammar.add_rule("root");
  grammar.add_alternative(root, {regex_element(grammar, pattern, RegexText::raw, field)});
  grammar.set_root(root);
  grammar.validate(field);
  return grammar;
}

}  // namespace tessera
