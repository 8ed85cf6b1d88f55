// A context-free grammar over bytes: the one form every output constraint compiles to (JSON
// schema, regex, choice, GBNF text). A rule is a list of alternatives, an alternative a sequence
// of elements, and an element either one byte out of a set or a reference to a rule. Groups and
// repetitions become rules of their own as they are built, so the matcher
// (grammar_matcher.h) knows only sequences and references. Characters beyond ASCII are their
// UTF-8 byte sequences (utf8_ranges.h), so a token that ends inside a character is matched too.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera {

using ByteSet = std::bitset<256>;

struct GrammarElement {
  enum class Kind : uint8_t { byte_set, rule };
  Kind kind = Kind::byte_set;
  int32_t index = 0;  // into Grammar::byte_sets() or Grammar::rules()

  bool operator==(const GrammarElement&) const = default;
};
using GrammarSequence = std::vector<GrammarElement>;

struct GrammarRule {
  std::string name;
  std::vector<GrammarSequence> alternatives;
  bool defined = false;  // a rule referenced before its definition is added stays undefined
};

class Grammar {
 public:
  // What one grammar may hold: a client's schema or grammar text must not make the engine build
  // an unbounded automaton.
  static constexpr size_t kMaxRules = 1 << 16;
  static constexpr size_t kMaxElements = 1 << 20;
  static constexpr int64_t kMaxRepetition = 1 << 12;  // the largest bound of x{m,n}
  // The elements a repetition may add by writing its item's alternatives out (repeat()).
  static constexpr int64_t kMaxInlinedElements = 1 << 12;

  // A new rule named after `name` (made unique with a suffix), with no alternatives yet.
  int32_t add_rule(std::string_view name);
  // The rule of that exact name, created undefined when there is none (a forward reference).
  int32_t rule_named(std::string_view name);
  std::optional<int32_t> find_rule(std::string_view name) const;
  // Adds an alternative and marks the rule defined.
  void add_alternative(int32_t rule, GrammarSequence sequence);
  void mark_defined(int32_t rule) { rules_.at(static_cast<size_t>(rule)).defined = true; }

  GrammarElement byte_set(const ByteSet& bytes);
  GrammarElement reference(int32_t rule) const { return {GrammarElement::Kind::rule, rule}; }
  // Appends one element per byte of `bytes`.
  void append_literal(GrammarSequence& sequence, std::string_view bytes);
  GrammarSequence literal(std::string_view bytes);
  // A rule matching `item` repeated min..max times (max: unbounded when empty), built from
  // right-recursive rules so the matcher's stacks stay flat. Throws Error naming `what` when a
  // bound passes kMaxRepetition.
  GrammarElement repeat(GrammarElement item, int64_t min, std::optional<int64_t> max,
                        std::string_view what);
  // A rule whose alternatives are the given sequences.
  GrammarElement choice(std::string_view name, std::vector<GrammarSequence> alternatives);

  void set_root(int32_t rule) { root_ = rule; }
  int32_t root() const { return root_; }
  const std::vector<GrammarRule>& rules() const { return rules_; }
  const std::vector<ByteSet>& byte_sets() const { return byte_sets_; }
  size_t num_elements() const { return num_elements_; }

  // Throws Error, naming `field` and the rule, when a referenced rule has no definition, a rule
  // is left-recursive (the matcher could not advance), or the grammar passes its limits.
  void validate(std::string_view field) const;
  // GBNF text of the grammar (for logs and tests); byte sets as classes of bytes.
  std::string to_text() const;

 private:
  // `item`'s alternatives to repeat in its place, or `item` alone (see repeat()).
  std::vector<GrammarSequence> repeated_alternatives(GrammarElement item, int64_t copies) const;

  std::vector<GrammarRule> rules_;
  std::unordered_map<std::string, int32_t> rule_ids_;       // by name
  std::unordered_map<std::string, int64_t> name_suffixes_;  // the next suffix to try per name
  std::vector<ByteSet> byte_sets_;
  std::unordered_map<ByteSet, int32_t> byte_set_ids_;
  size_t num_elements_ = 0;
  int32_t root_ = 0;
};

}  // namespace tessera
