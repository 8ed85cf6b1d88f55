#include "engine/structured_output/grammar.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/check.h"

namespace tessera {

int32_t Grammar::add_rule(std::string_view name) {
  TESSERA_REQUIRE(rules_.size() < kMaxRules,
                  "structured output: the grammar has more than {} rules; simplify the schema or "
                  "grammar",
                  kMaxRules);
  std::string unique(name);
  if (rule_ids_.count(unique)) {
    int64_t& suffix = name_suffixes_[unique];
    do unique = fmt::format("{}-{}", name, ++suffix);
    while (rule_ids_.count(unique));
  }
  rule_ids_.emplace(unique, static_cast<int32_t>(rules_.size()));
  rules_.push_back(GrammarRule{std::move(unique), {}, false});
  return static_cast<int32_t>(rules_.size() - 1);
}

std::optional<int32_t> Grammar::find_rule(std::string_view name) const {
  auto found = rule_ids_.find(std::string(name));
  if (found == rule_ids_.end()) return std::nullopt;
  return found->second;
}

int32_t Grammar::rule_named(std::string_view name) {
  if (std::optional<int32_t> found = find_rule(name)) return *found;
  return add_rule(name);
}

void Grammar::add_alternative(int32_t rule, GrammarSequence sequence) {
  num_elements_ += sequence.size() + 1;
  TESSERA_REQUIRE(
      num_elements_ <= kMaxElements,
      "structured output: the grammar has more than {} elements; simplify the schema or grammar",
      kMaxElements);
  GrammarRule& target = rules_.at(static_cast<size_t>(rule));
  target.alternatives.push_back(std::move(sequence));
  target.defined = true;
}

GrammarElement Grammar::byte_set(const ByteSet& bytes) {
  auto [found, added] = byte_set_ids_.emplace(bytes, static_cast<int32_t>(byte_sets_.size()));
  if (added) byte_sets_.push_back(bytes);
  return {GrammarElement::Kind::byte_set, found->second};
}

void Grammar::append_literal(GrammarSequence& sequence, std::string_view bytes) {
  for (unsigned char byte : bytes) {
    ByteSet one;
    one.set(byte);
    sequence.push_back(byte_set(one));
  }
}

GrammarSequence Grammar::literal(std::string_view bytes) {
  GrammarSequence sequence;
  append_literal(sequence, bytes);
  return sequence;
}

GrammarElement Grammar::choice(std::string_view name, std::vector<GrammarSequence> alternatives) {
  const int32_t rule = add_rule(name);
  for (GrammarSequence& alternative : alternatives) add_alternative(rule, std::move(alternative));
  mark_defined(rule);
  return reference(rule);
}

std::vector<GrammarSequence> Grammar::repeated_alternatives(GrammarElement item,
                                                            int64_t copies) const {
  if (item.kind != GrammarElement::Kind::rule) return {{item}};
  const GrammarRule& rule = rules_.at(static_cast<size_t>(item.index));
  size_t elements = 0;
  for (const GrammarSequence& alternative : rule.alternatives) {
    if (alternative.empty() || alternative.front().kind != GrammarElement::Kind::byte_set)
      return {{item}};
    elements += alternative.size() + 1;
  }
  if (!rule.defined || rule.alternatives.empty() ||
      static_cast<int64_t>(elements) * copies > kMaxInlinedElements)
    return {{item}};
  return rule.alternatives;
}

GrammarElement Grammar::repeat(GrammarElement item, int64_t min, std::optional<int64_t> max,
                               std::string_view what) {
  TESSERA_REQUIRE(
      min >= 0 && min <= kMaxRepetition && (!max || (*max >= min && *max <= kMaxRepetition)),
      "{}: the repetition {{{},{}}} is out of range (bounds 0..{}, min <= max)", what, min,
      max ? std::to_string(*max) : std::string(), kMaxRepetition);
  // The optional tail: x{0,k} is tail_k ::= x tail_{k-1} | (empty), x* is star ::= x star | ().
  // A small item rule whose alternatives each start with a byte (a JSON string's character) is
  // written out in the tail, one alternative each: a stack's top then stays in the repetition
  // from character to character, so what may follow is decided per position ahead of time
  // (position_tokens.h) rather than per stack below.
  const std::vector<GrammarSequence> items = repeated_alternatives(item, max ? *max - min : 1);
  auto add_items = [&](int32_t rule, std::optional<int32_t> next) {
    for (const GrammarSequence& alternative : items) {
      GrammarSequence more = alternative;
      if (next) more.push_back(reference(*next));
      add_alternative(rule, std::move(more));
    }
    add_alternative(rule, {});
  };
  GrammarSequence tail;
  if (!max) {
    const int32_t star = add_rule("repeat");
    add_items(star, star);
    tail.push_back(reference(star));
  } else if (*max > min) {
    std::optional<int32_t> previous;
    for (int64_t k = 1; k <= *max - min; ++k) {
      const int32_t optional = add_rule("repeat");
      add_items(optional, previous);
      previous = optional;
    }
    tail.push_back(reference(*previous));
  }
  const int32_t rule = add_rule("repeat");
  GrammarSequence sequence(static_cast<size_t>(min), item);
  sequence.insert(sequence.end(), tail.begin(), tail.end());
  add_alternative(rule, std::move(sequence));
  return reference(rule);
}

void Grammar::validate(std::string_view field) const {
  TESSERA_REQUIRE(!rules_.empty(), "{}: the grammar has no rules", field);
  for (const GrammarRule& rule : rules_)
    TESSERA_REQUIRE(rule.defined, "{}: the grammar uses rule '{}' but never defines it", field,
                    rule.name);
  // Which rules can match nothing at all, to a fixed point.
  std::vector<bool> nullable(rules_.size(), false);
  auto element_nullable = [&](const GrammarElement& element) {
    return element.kind == GrammarElement::Kind::rule &&
           nullable[static_cast<size_t>(element.index)];
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      for (const GrammarSequence& alternative : rules_[r].alternatives)
        if (std::all_of(alternative.begin(), alternative.end(), element_nullable)) {
          nullable[r] = changed = true;
          break;
        }
    }
  }
  // A rule that can reach itself before consuming a byte is left-recursive: a depth-first walk
  // over "may start with" edges finds the cycle.
  std::vector<std::vector<int32_t>> starts_with(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r)
    for (const GrammarSequence& alternative : rules_[r].alternatives)
      for (const GrammarElement& element : alternative) {
        if (element.kind == GrammarElement::Kind::rule) starts_with[r].push_back(element.index);
        if (!element_nullable(element)) break;
      }
  enum class Mark : uint8_t { unseen, on_path, done };
  std::vector<Mark> marks(rules_.size(), Mark::unseen);
  std::vector<std::pair<int32_t, size_t>> path;  // rule, next edge
  for (size_t start = 0; start < rules_.size(); ++start) {
    if (marks[start] != Mark::unseen) continue;
    path.push_back({static_cast<int32_t>(start), 0});
    marks[start] = Mark::on_path;
    while (!path.empty()) {
      auto& [rule, edge] = path.back();
      const auto& edges = starts_with[static_cast<size_t>(rule)];
      if (edge == edges.size()) {
        marks[static_cast<size_t>(rule)] = Mark::done;
        path.pop_back();
        continue;
      }
      const int32_t next = edges[edge++];
      if (marks[static_cast<size_t>(next)] == Mark::on_path)
        throw Error(fmt::format(
            "{}: rule '{}' is left-recursive (it can start with itself without reading any "
            "text); rewrite it with repetition or right recursion",
            field, rules_[static_cast<size_t>(next)].name));
      if (marks[static_cast<size_t>(next)] == Mark::unseen) {
        marks[static_cast<size_t>(next)] = Mark::on_path;
        path.push_back({next, 0});
      }
    }
  }
}

namespace {

std::string byte_class_text(const ByteSet& bytes) {
  auto byte_text = [](int byte) {
    if (byte >= 0x20 && byte < 0x7f && byte != '\\' && byte != ']' && byte != '-' && byte != '^')
      return std::string(1, static_cast<char>(byte));
    return fmt::format("\\x{:02X}", byte);
  };
  std::string text = "[";
  for (int byte = 0; byte < 256;) {
    if (!bytes.test(static_cast<size_t>(byte))) {
      ++byte;
      continue;
    }
    int last = byte;
    while (last + 1 < 256 && bytes.test(static_cast<size_t>(last + 1))) ++last;
    text += byte_text(byte);
    if (last > byte) text += "-" + byte_text(last);
    byte = last + 1;
  }
  return text + "]";
}

}  // namespace

std::string Grammar::to_text() const {
  std::string text;
  for (size_t r = 0; r < rules_.size(); ++r) {
    text += rules_[r].name + " ::=";
    const auto& alternatives = rules_[r].alternatives;
    for (size_t a = 0; a < alternatives.size(); ++a) {
      if (a > 0) text += " |";
      if (alternatives[a].empty()) text += " \"\"";
      for (const GrammarElement& element : alternatives[a])
        text += " " + (element.kind == GrammarElement::Kind::rule
                           ? rules_[static_cast<size_t>(element.index)].name
                           : byte_class_text(byte_sets_[static_cast<size_t>(element.index)]));
    }
    text += "\n";
  }
  return text;
}

}  // namespace tessera
