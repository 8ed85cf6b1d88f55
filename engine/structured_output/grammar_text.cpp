#include "engine/structured_output/grammar_text.h"

#include <fmt/format.h>

#include "engine/structured_output/code_point_set.h"
#include "engine/structured_output/syntax_reader.h"
#include "runtime/check.h"

namespace tessera {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GrammarTextParser : SyntaxReader {
 public:
  GrammarTextParser(std::string_view text, std::string_view field) : SyntaxReader(text, field) {}

  Grammar parse() {
    skip_space();
    TESSERA_REQUIRE(!at_end(), "{}: the grammar is empty; it needs at least `root ::= ...`",
                    field_);
    while (!at_end()) {
      const std::string name = parse_name();
      skip_space();
      expect("::=");
      const int32_t rule = grammar_.rule_named(name);
      TESSERA_REQUIRE(grammar_.rules()[static_cast<size_t>(rule)].alternatives.empty() &&
                          !grammar_.rules()[static_cast<size_t>(rule)].defined,
                      "{}: rule '{}' is defined twice (line {})", field_, name, line());
      for (GrammarSequence& alternative : parse_alternatives(false))
        grammar_.add_alternative(rule, std::move(alternative));
      grammar_.mark_defined(rule);
    }
    const std::optional<int32_t> root = grammar_.find_rule("root");
    TESSERA_REQUIRE(root && grammar_.rules()[static_cast<size_t>(*root)].defined,
                    "{}: the grammar has no `root ::= ...` rule, where it starts", field_);
    grammar_.set_root(*root);
    grammar_.validate(field_);
    return std::move(grammar_);
  }

 private:
  size_t line() const {
    size_t count = 1;
    for (size_t i = 0; i < position_ && i < text_.size(); ++i) count += text_[i] == '\n';
    return count;
  }
  [[noreturn]] void fail(std::string_view what) const override {
    throw Error(fmt::format("{}: {} at line {} of the grammar", field_, what, line()));
  }
  void expect(std::string_view token) {
    if (text_.substr(position_, token.size()) != token) fail(fmt::format("expected '{}'", token));
    position_ += token.size();
  }
  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n') ++position_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++position_;
      } else {
        break;
      }
    }
  }
  std::string parse_name() {
    const size_t start = position_;
    while (!at_end() && is_name_char(peek())) ++position_;
    if (position_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, position_ - start));
  }
  // Whether a rule definition (`name ::=`) starts here: the end of the rule before it.
  bool at_rule_start() const {
    size_t i = position_;
    while (i < text_.size() && is_name_char(text_[i])) ++i;
    if (i == position_) return false;
    while (i < text_.size() &&
           (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\n' || text_[i] == '\r'))
      ++i;
    return text_.substr(i, 3) == "::=";
  }

  std::vector<GrammarSequence> parse_alternatives(bool nested) {
    if (nesting_ > kMaxNesting) fail("groups are nested too deeply");
    ++nesting_;
    std::vector<GrammarSequence> alternatives{parse_sequence(nested)};
    while (peek() == '|') {
      ++position_;
      alternatives.push_back(parse_sequence(nested));
    }
    --nesting_;
    return alternatives;
  }

  GrammarSequence parse_sequence(bool nested) {
    GrammarSequence sequence;
    for (;;) {
      skip_space();
      if (at_end() || peek() == '|' || (nested && peek() == ')') || at_rule_start()) break;
      if (++depth_guard_ > kMaxItems) fail("the grammar is too long");
      GrammarElement item = parse_item(sequence);
      parse_postfix(item, sequence);
    }
    return sequence;
  }

  // Appends a literal's bytes to `sequence` itself and returns its last element (so a postfix
  // applies to the last character, as in GBNF); other items are returned for the caller to add.
  GrammarElement parse_item(GrammarSequence& sequence) {
    const char c = peek();
    if (c == '"') {
      ++position_;
      std::string bytes;
      while (peek() != '"') {
        if (at_end() || peek() == '\n') fail("unterminated string literal");
        bytes += utf8_encode(parse_char());
      }
      ++position_;
      if (bytes.empty()) return pending_empty();
      // Everything but the last character goes in now; the last is the item.
      size_t last_start = bytes.size() - 1;
      while (last_start > 0 && (static_cast<unsigned char>(bytes[last_start]) & 0xC0) == 0x80)
        --last_start;
      grammar_.append_literal(sequence, std::string_view(bytes).substr(0, last_start));
      std::string_view last = std::string_view(bytes).substr(last_start);
      if (last.size() == 1) return grammar_.literal(last).front();
      return grammar_.choice("literal", {grammar_.literal(last)});
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++position_;
      return CodePointSet::all().element(grammar_, "any-char");
    }
    if (c == '(') {
      ++position_;
      std::vector<GrammarSequence> alternatives = parse_alternatives(true);
      skip_space();
      expect(")");
      return grammar_.choice("group", std::move(alternatives));
    }
    if (is_name_char(c)) return grammar_.reference(grammar_.rule_named(parse_name()));
    fail(fmt::format("unexpected character '{}'", c));
  }

  // An empty literal "" adds nothing; a rule with one empty alternative stands for it.
  GrammarElement pending_empty() { return grammar_.choice("empty", {GrammarSequence{}}); }

  GrammarElement parse_class() {
    const bool negated = parse_class_opening();
    CodePointSet set;
    while (peek() != ']') {
      if (at_end()) fail("unterminated character class");
      const uint32_t first = parse_char();
      uint32_t last = first;
      if (peek() == '-' && position_ + 1 < text_.size() && text_[position_ + 1] != ']') {
        ++position_;
        last = parse_char();
        if (last < first) fail("a character range runs backwards");
      }
      set.add(first, last);
    }
    ++position_;
    return (negated ? set.complement() : set).element(grammar_, "class");
  }

  // One character of a literal or class, escapes decoded.
  uint32_t parse_char() {
    if (peek() != '\\') return utf8_decode(text_, position_, field_);
    ++position_;
    const char escape = peek();
    ++position_;
    switch (escape) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '\'':
      case ']':
      case '[':
      case '-':
      case '/':
      case '^':
        return static_cast<unsigned char>(escape);
      case 'x':
        return parse_hex(2);
      case 'u':
        return parse_hex(4);
      case 'U':
        return parse_hex(8);
      default:
        fail(fmt::format("unknown escape '\\{}'", escape));
    }
  }
  void parse_postfix(GrammarElement item, GrammarSequence& sequence) {
    const std::optional<Repetition> repetition = parse_repetition();
    sequence.push_back(repetition ? grammar_.repeat(item, repetition->min, repetition->max,
                                                    fmt::format("{} (line {})", field_, line()))
                                  : item);
  }

  static constexpr size_t kMaxItems = 1 << 20;
  static constexpr int kMaxNesting = 256;
  int nesting_ = 0;
  size_t depth_guard_ = 0;
  Grammar grammar_;
};

}  // namespace

Grammar parse_grammar_text(std::string_view text, std::string_view field) {
  return GrammarTextParser(text, field).parse();
}

}  // namespace tessera
