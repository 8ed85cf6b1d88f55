// What each grammar position decides ahead against the vocabulary, as xgrammar does. A stack whose
// top is at a position takes, whatever lies below it, every token whose bytes end inside the
// alternative holding that position; a token that would leave the alternative depends on the stack
// below, unless no byte after the alternative's rule (follow_sets.h) could take its next byte, in
// which case no stack takes it. So a state met for the first time gets its mask from the decided
// tokens of its stacks' tops and a walk of only the undecided trie subtrees, instead of a walk of
// the whole vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/structured_output/grammar_automaton.h"
#include "engine/structured_output/token_vocabulary.h"

namespace tessera {

struct PositionTokens {
  // More undecided subtrees than this and the position's states walk the whole vocabulary: a
  // position that ends its alternative after a byte (a rule of single characters) decides little.
  static constexpr size_t kMaxUndecidedSubtrees = 4096;

  std::vector<int32_t> accepted_ids;  // the tokens any stack at the position takes, when few
  // or as a token mask, when many (then ids are empty); positions with equal masks share one
  std::shared_ptr<const std::vector<uint32_t>> accepted_words;
  std::vector<int32_t> undecided;  // trie nodes whose subtrees depend on the stack below
  bool walk_all = false;           // too many undecided: walk the whole vocabulary
  int64_t nodes_visited = 0;       // the work deciding took

  // ORs the accepted tokens into `words` (TokenVocabulary::mask_words() of them).
  void add_accepted(std::span<uint32_t> words) const;
  // What the position holds, its mask not counted.
  size_t bytes() const;
};

// Decides `position` (a byte element of the automaton's grammar) against `vocabulary`; `follow`
// holds the bytes that may come after the rule holding the position.
PositionTokens decide_position_tokens(GrammarAutomaton& automaton,
                                      const TokenVocabulary& vocabulary, int32_t position,
                                      const ByteSet& follow);

}  // namespace tessera
