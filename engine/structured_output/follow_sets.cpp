#include "engine/structured_output/follow_sets.h"

namespace tessera {

namespace {

using Sequence = GrammarSequence;

// Which rules may match no bytes: an alternative is empty once each of its elements is, and a byte
// never is; a rule is empty once one of its alternatives is.
std::vector<bool> nullable_rules(const Grammar& grammar) {
  const std::vector<GrammarRule>& rules = grammar.rules();
  std::vector<bool> nullable(rules.size(), false);
  struct Alternative {
    int32_t rule;
    int64_t unknown;  // rule references not known empty yet; -1 when it holds a byte
  };
  std::vector<Alternative> alternatives;
  std::vector<std::vector<size_t>> users(rules.size());  // per rule: alternatives that reference it
  std::vector<int32_t> work;
  for (size_t rule = 0; rule < rules.size(); ++rule) {
    for (const Sequence& sequence : rules[rule].alternatives) {
      Alternative alternative{static_cast<int32_t>(rule), 0};
      for (const GrammarElement& element : sequence) {
        if (element.kind == GrammarElement::Kind::byte_set) {
          alternative.unknown = -1;
          break;
        }
        ++alternative.unknown;
      }
      if (alternative.unknown < 0) continue;
      const size_t index = alternatives.size();
      alternatives.push_back(alternative);
      for (const GrammarElement& element : sequence)
        users[static_cast<size_t>(element.index)].push_back(index);
      if (alternative.unknown == 0 && !nullable[rule]) {
        nullable[rule] = true;
        work.push_back(static_cast<int32_t>(rule));
      }
    }
  }
  while (!work.empty()) {
    const auto rule = static_cast<size_t>(work.back());
    work.pop_back();
    for (size_t index : users[rule]) {
      Alternative& alternative = alternatives[index];
      const auto owner = static_cast<size_t>(alternative.rule);
      if (--alternative.unknown == 0 && !nullable[owner]) {
        nullable[owner] = true;
        work.push_back(alternative.rule);
      }
    }
  }
  return nullable;
}

// Propagates sets along edges `from` -> `to` (sets[to] |= sets[from]) until nothing changes; a set
// only grows, so each rule is revisited at most 256 times.
void propagate(std::vector<ByteSet>& sets, const std::vector<std::vector<int32_t>>& edges) {
  std::vector<int32_t> work;
  std::vector<bool> queued(sets.size(), true);
  for (size_t rule = 0; rule < sets.size(); ++rule) work.push_back(static_cast<int32_t>(rule));
  while (!work.empty()) {
    const auto from = static_cast<size_t>(work.back());
    work.pop_back();
    queued[from] = false;
    for (int32_t to : edges[from]) {
      const ByteSet merged = sets[static_cast<size_t>(to)] | sets[from];
      if (merged == sets[static_cast<size_t>(to)]) continue;
      sets[static_cast<size_t>(to)] = merged;
      if (!queued[static_cast<size_t>(to)]) {
        queued[static_cast<size_t>(to)] = true;
        work.push_back(to);
      }
    }
  }
}

}  // namespace

std::vector<ByteSet> bytes_after_rules(const Grammar& grammar) {
  const std::vector<GrammarRule>& rules = grammar.rules();
  const std::vector<ByteSet>& byte_sets = grammar.byte_sets();
  const std::vector<bool> nullable = nullable_rules(grammar);
  auto is_nullable = [&](const GrammarElement& element) {
    return element.kind == GrammarElement::Kind::rule &&
           nullable[static_cast<size_t>(element.index)];
  };

  // FIRST: the bytes a rule may start with. A rule's own are the bytes of its alternatives' empty
  // prefixes' next byte; a reference in that prefix adds the referenced rule's (an edge).
  std::vector<ByteSet> first(rules.size());
  std::vector<std::vector<int32_t>> first_edges(rules.size());  // referenced -> referencing
  for (size_t rule = 0; rule < rules.size(); ++rule)
    for (const Sequence& sequence : rules[rule].alternatives)
      for (const GrammarElement& element : sequence) {
        if (element.kind == GrammarElement::Kind::byte_set) {
          first[rule] |= byte_sets[static_cast<size_t>(element.index)];
          break;
        }
        first_edges[static_cast<size_t>(element.index)].push_back(static_cast<int32_t>(rule));
        if (!is_nullable(element)) break;
      }
  propagate(first, first_edges);

  // FOLLOW: a reference takes the first bytes of what comes after it in its alternative, and the
  // referencing rule's own when all of that may be empty (an edge).
  std::vector<ByteSet> follow(rules.size());
  std::vector<std::vector<int32_t>> follow_edges(rules.size());  // referencing -> referenced
  for (size_t rule = 0; rule < rules.size(); ++rule)
    for (const Sequence& sequence : rules[rule].alternatives) {
      ByteSet after;            // first bytes of the elements after the one at hand
      bool after_empty = true;  // those may all be empty
      for (size_t i = sequence.size(); i-- > 0;) {
        const GrammarElement& element = sequence[i];
        if (element.kind == GrammarElement::Kind::byte_set) {
          after = byte_sets[static_cast<size_t>(element.index)];
          after_empty = false;
          continue;
        }
        const auto referenced = static_cast<size_t>(element.index);
        follow[referenced] |= after;
        if (after_empty) follow_edges[rule].push_back(element.index);
        if (is_nullable(element)) {
          after |= first[referenced];
        } else {
          after = first[referenced];
          after_empty = false;
        }
      }
    }
  propagate(follow, follow_edges);
  return follow;
}

}  // namespace tessera
