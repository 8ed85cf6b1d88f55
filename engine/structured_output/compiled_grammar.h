// A grammar ready to constrain decoding against one vocabulary: its automaton, the tokens each
// position decides ahead (position_tokens.h: the starts of alternatives when compiled, within a
// budget of work; the rest when first met), and the token mask of each automaton state met so far
// (kept up to a byte budget of its own and within the memory all grammars share, then dropped and
// rebuilt as needed). One is shared by every request with the same constraint (GrammarCache); its
// calls are serialized by a mutex, and in the engine only the engine thread makes them.
// GrammarMatcher is one sequence's place in it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/structured_output/grammar_automaton.h"
#include "engine/structured_output/position_tokens.h"
#include "engine/structured_output/token_vocabulary.h"

namespace tessera {

struct GrammarStatistics {
  int64_t masks_computed = 0;        // states met for the first time
  int64_t masks_from_positions = 0;  // of those, made from decided positions (position_tokens.h)
  int64_t masks_reused = 0;
  int64_t positions_decided = 0;
  int64_t automaton_states = 0;
  size_t automaton_bytes = 0;  // charged to the shared memory (grammar_memory.h)
  size_t mask_bytes = 0;       // of the masks cached now
  size_t position_bytes = 0;   // of the decided positions
};

class CompiledGrammar {
 public:
  static constexpr size_t kMaskCacheBytes = size_t{64} << 20;
  // Trie nodes the compile may visit deciding positions ahead (tens of milliseconds).
  static constexpr int64_t kDecideAheadNodeVisits = int64_t{1} << 25;

  // `memory`, when given, is charged for the automaton and the cached masks (grammar_memory.h).
  CompiledGrammar(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                  std::shared_ptr<GrammarMemory> memory = nullptr);
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  GrammarStateId initial_state() const { return initial_; }
  // The state after `token`'s bytes; GrammarAutomaton::kDead when the grammar does not allow them
  // (or the token stands for no text).
  GrammarStateId advance(GrammarStateId state, int32_t token);
  bool accepts(GrammarStateId state);
  bool can_continue(GrammarStateId state);
  // ORs into `words` (TokenVocabulary::mask_words() of them) bit t of every text token t the
  // grammar allows next. End tokens are the caller's: they may end the text where accepts().
  void fill_mask(GrammarStateId state, std::span<uint32_t> words);
  GrammarStatistics statistics();

 private:
  const std::vector<uint32_t>& mask_of(GrammarStateId state);
  const PositionTokens& decided(int32_t position);
  void reserve_position_bytes(size_t bytes);
  // ORs into `mask` the tokens of the trie nodes [first, end) (a subtree, or the whole trie) that
  // the automaton takes from `before`, the state before the first node's byte.
  void walk_trie(GrammarStateId before, size_t first, size_t end, std::vector<uint32_t>& mask);
  void walk_subtree(GrammarStateId state, int32_t node, std::vector<uint32_t>& mask);
  // Room for one more mask: this grammar's cached masks are dropped when they would pass
  // kMaskCacheBytes or the shared memory is full; an Error when even that is not enough.
  void make_room_for_mask(size_t bytes);
  void drop_masks();

  std::mutex mutex_;
  std::shared_ptr<GrammarMemory> memory_;  // before automaton_, which it outlives
  GrammarAutomaton automaton_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  GrammarStateId initial_;
  std::unordered_map<GrammarStateId, std::vector<uint32_t>> masks_;
  size_t mask_bytes_ = 0;        // of masks_, charged to memory_
  std::vector<ByteSet> follow_;  // per rule (follow_sets.h)
  std::unordered_map<int32_t, PositionTokens> positions_;
  // The positions' token masks by a hash of their words: equal masks are held once.
  std::unordered_multimap<size_t, std::shared_ptr<const std::vector<uint32_t>>> position_masks_;
  size_t position_bytes_ = 0;  // of positions_, their masks and follow_, charged to memory_
  std::vector<GrammarStateId> walk_states_;  // per trie depth, reused between walks
  std::vector<int32_t> top_positions_;       // reused between masks
  std::vector<int32_t> undecided_;
  GrammarStatistics statistics_;
};

// One sequence's progress through a compiled grammar.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar)
      : grammar_(std::move(grammar)), state_(grammar_->initial_state()) {}
  // Advances past `token`; false, leaving the state as it was, when the grammar forbids it.
  bool accept(int32_t token);
  // The output so far is a whole match: an end token may come now.
  bool accepts() const { return grammar_->accepts(state_); }
  // Nothing may follow: the output is complete.
  bool terminated() const { return accepts() && !grammar_->can_continue(state_); }
  // Sets `words` to the tokens allowed next: the grammar's, and `end_ids` where it may end.
  void fill_mask(std::span<uint32_t> words, std::span<const int32_t> end_ids) const;
  // Where it is: matchers of one grammar in one state have the same mask (for the same end_ids).
  const CompiledGrammar* grammar() const { return grammar_.get(); }
  GrammarStateId state() const { return state_; }

 private:
  std::shared_ptr<CompiledGrammar> grammar_;
  GrammarStateId state_;
};

}  // namespace tessera
