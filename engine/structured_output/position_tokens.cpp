#include "engine/structured_output/position_tokens.h"

namespace tessera {

void PositionTokens::add_accepted(std::span<uint32_t> words) const {
  if (accepted_words != nullptr) {
    const std::vector<uint32_t>& accepted = *accepted_words;
    for (size_t i = 0; i < words.size(); ++i) words[i] |= accepted[i];
    return;
  }
  for (int32_t token : accepted_ids)
    words[static_cast<size_t>(token) / 32] |= 1u << (static_cast<uint32_t>(token) % 32);
}

size_t PositionTokens::bytes() const {
  return sizeof(PositionTokens) + accepted_ids.capacity() * sizeof(int32_t) +
         undecided.capacity() * sizeof(int32_t);
}

PositionTokens decide_position_tokens(GrammarAutomaton& automaton,
                                      const TokenVocabulary& vocabulary, int32_t position,
                                      const ByteSet& follow) {
  PositionTokens result;
  // Per trie depth: the state after the path's bytes, and whether the path could have left the
  // alternative at a byte that something after it may take (then a dead end is undecided).
  std::vector<GrammarStateId> states(vocabulary.max_depth() + 1, GrammarAutomaton::kDead);
  std::vector<uint8_t> may_leave(vocabulary.max_depth() + 1, 0);
  states[0] = automaton.position_state(position);
  const size_t nodes = vocabulary.num_nodes();
  for (size_t node = 0; node < nodes;) {
    ++result.nodes_visited;
    const size_t depth = vocabulary.depth(node);
    const GrammarStateId before = states[depth - 1];
    const uint8_t byte = vocabulary.byte(node);
    const bool leaves =
        may_leave[depth - 1] != 0 || (automaton.accepts(before) && follow.test(byte));
    const GrammarStateId next = automaton.advance(before, byte);
    if (next == GrammarAutomaton::kDead) {
      if (leaves) result.undecided.push_back(static_cast<int32_t>(node));
      if (result.undecided.size() > PositionTokens::kMaxUndecidedSubtrees) {
        result.walk_all = true;
        result.accepted_ids = std::vector<int32_t>();
        result.undecided = std::vector<int32_t>();
        return result;
      }
      node = vocabulary.subtree_end(node);
      continue;
    }
    states[depth] = next;
    may_leave[depth] = leaves ? 1 : 0;
    for (int32_t token : vocabulary.tokens_at(node)) result.accepted_ids.push_back(token);
    ++node;
  }
  // A mask when it is smaller than the ids, or about as cheap to OR in.
  const auto words = static_cast<size_t>(vocabulary.mask_words());
  if (result.accepted_ids.size() * 4 > words) {
    auto mask = std::make_shared<std::vector<uint32_t>>(words, 0u);
    for (int32_t token : result.accepted_ids)
      (*mask)[static_cast<size_t>(token) / 32] |= 1u << (static_cast<uint32_t>(token) % 32);
    result.accepted_words = std::move(mask);
    result.accepted_ids = std::vector<int32_t>();
  }
  result.undecided.shrink_to_fit();
  return result;
}

}  // namespace tessera
