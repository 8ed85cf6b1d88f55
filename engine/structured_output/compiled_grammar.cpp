#include "engine/structured_output/compiled_grammar.h"

#include <algorithm>

#include "engine/structured_output/follow_sets.h"
#include "runtime/check.h"

namespace tessera {

CompiledGrammar::CompiledGrammar(const Grammar& grammar,
                                 std::shared_ptr<const TokenVocabulary> vocabulary,
                                 std::shared_ptr<GrammarMemory> memory)
    : memory_(std::move(memory)),
      automaton_(grammar, memory_.get()),
      vocabulary_(std::move(vocabulary)),
      initial_(automaton_.initial()) {
  TESSERA_CHECK(vocabulary_ != nullptr, "a compiled grammar needs a vocabulary");
  automaton_.on_memory_full([this] { drop_masks(); });
  try {
    follow_ = bytes_after_rules(grammar);
    const size_t follow_bytes = follow_.size() * sizeof(ByteSet);
    if (memory_ != nullptr) memory_->reserve(follow_bytes);
    position_bytes_ = follow_bytes;
    // The starts of alternatives are decided ahead, in grammar order while the budget lasts (and
    // the automaton stays well inside its state limit, which the requests' own states need);
    // the rest when first met: a position inside a literal takes few tokens and is quick to
    // decide, and one inside a character is the top of a stack only after a token that ends
    // within the character.
    int64_t visits = 0;
    for (int32_t position : automaton_.alternative_starts()) {
      if (visits >= kDecideAheadNodeVisits ||
          automaton_.num_states() > GrammarAutomaton::kMaxStates / 2)
        break;
      visits += decided(position).nodes_visited;
    }
  } catch (...) {
    if (memory_ != nullptr) memory_->release(position_bytes_);
    throw;
  }
}

CompiledGrammar::~CompiledGrammar() {
  drop_masks();
  if (memory_ != nullptr) memory_->release(position_bytes_);
}

void CompiledGrammar::drop_masks() {
  masks_.clear();
  if (memory_ != nullptr) memory_->release(mask_bytes_);
  mask_bytes_ = 0;
}

void CompiledGrammar::make_room_for_mask(size_t bytes) {
  if (mask_bytes_ + bytes > kMaskCacheBytes) drop_masks();
  if (memory_ == nullptr) return;
  if (!memory_->try_reserve(bytes)) {
    drop_masks();
    memory_->reserve(bytes);
  }
}

GrammarStateId CompiledGrammar::advance(GrammarStateId state, int32_t token) {
  std::lock_guard lock(mutex_);
  if (token < 0 || static_cast<size_t>(token) >= vocabulary_->num_token_ids())
    return GrammarAutomaton::kDead;
  const std::string& bytes = vocabulary_->token_bytes(token);
  if (bytes.empty()) return GrammarAutomaton::kDead;
  return automaton_.advance(state, bytes);
}

bool CompiledGrammar::accepts(GrammarStateId state) {
  std::lock_guard lock(mutex_);
  return automaton_.accepts(state);
}

bool CompiledGrammar::can_continue(GrammarStateId state) {
  std::lock_guard lock(mutex_);
  return automaton_.can_continue(state);
}

GrammarStatistics CompiledGrammar::statistics() {
  std::lock_guard lock(mutex_);
  GrammarStatistics result = statistics_;
  result.automaton_states = static_cast<int64_t>(automaton_.num_states());
  result.automaton_bytes = automaton_.bytes();
  result.mask_bytes = mask_bytes_;
  result.position_bytes = position_bytes_;
  result.positions_decided = static_cast<int64_t>(positions_.size());
  return result;
}

void CompiledGrammar::fill_mask(GrammarStateId state, std::span<uint32_t> words) {
  std::lock_guard lock(mutex_);
  const std::vector<uint32_t>& mask = mask_of(state);
  TESSERA_CHECK(words.size() == mask.size(), "a token mask of {} words for {}", words.size(),
                mask.size());
  for (size_t i = 0; i < words.size(); ++i) words[i] |= mask[i];
}

const PositionTokens& CompiledGrammar::decided(int32_t position) {
  if (auto found = positions_.find(position); found != positions_.end()) return found->second;
  PositionTokens tokens =
      decide_position_tokens(automaton_, *vocabulary_, position,
                             follow_[static_cast<size_t>(automaton_.rule_at(position))]);
  // A mask equal to one held already is shared; a new one is charged with the position, in one
  // reservation, so that a failed one leaves nothing charged.
  size_t bytes = tokens.bytes();
  size_t hash = 0;
  bool new_mask = false;
  if (tokens.accepted_words != nullptr) {
    const std::vector<uint32_t>& words = *tokens.accepted_words;
    hash = std::hash<std::string_view>()(std::string_view(
        reinterpret_cast<const char*>(words.data()), words.size() * sizeof(uint32_t)));
    auto [first, last] = position_masks_.equal_range(hash);
    auto same =
        std::find_if(first, last, [&](const auto& entry) { return *entry.second == words; });
    if (same != last) {
      tokens.accepted_words = same->second;
    } else {
      new_mask = true;
      bytes += words.size() * sizeof(uint32_t) + sizeof(words) + 32;
    }
  }
  reserve_position_bytes(bytes);
  if (new_mask) position_masks_.emplace(hash, tokens.accepted_words);
  return positions_.emplace(position, std::move(tokens)).first->second;
}

void CompiledGrammar::reserve_position_bytes(size_t bytes) {
  if (memory_ != nullptr && !memory_->try_reserve(bytes)) {
    drop_masks();
    memory_->reserve(bytes);
  }
  position_bytes_ += bytes;
}

void CompiledGrammar::walk_trie(GrammarStateId before, size_t first, size_t end,
                                std::vector<uint32_t>& mask) {
  // Depth-first order: a node's state is its parent's advanced by its byte; a rejected node skips
  // its whole subtree.
  const TokenVocabulary& vocabulary = *vocabulary_;
  walk_states_.resize(vocabulary.max_depth() + 1, GrammarAutomaton::kDead);
  walk_states_[vocabulary.depth(first) - 1] = before;
  for (size_t node = first; node < end;) {
    const size_t depth = vocabulary.depth(node);
    const GrammarStateId next = automaton_.advance(walk_states_[depth - 1], vocabulary.byte(node));
    if (next == GrammarAutomaton::kDead) {
      node = vocabulary.subtree_end(node);
      continue;
    }
    walk_states_[depth] = next;
    for (int32_t token : vocabulary.tokens_at(node))
      mask[static_cast<size_t>(token) / 32] |= 1u << (static_cast<uint32_t>(token) % 32);
    ++node;
  }
}

void CompiledGrammar::walk_subtree(GrammarStateId state, int32_t node,
                                   std::vector<uint32_t>& mask) {
  const auto at = static_cast<size_t>(node);
  const std::string_view path = vocabulary_->path(at);
  const GrammarStateId before = automaton_.advance(state, path.substr(0, path.size() - 1));
  if (before != GrammarAutomaton::kDead) walk_trie(before, at, vocabulary_->subtree_end(at), mask);
}

const std::vector<uint32_t>& CompiledGrammar::mask_of(GrammarStateId state) {
  if (auto found = masks_.find(state); found != masks_.end()) {
    ++statistics_.masks_reused;
    return found->second;
  }
  ++statistics_.masks_computed;
  const TokenVocabulary& vocabulary = *vocabulary_;
  const size_t words = static_cast<size_t>(vocabulary.mask_words());
  const size_t bytes = words * sizeof(uint32_t);
  make_room_for_mask(bytes);
  std::vector<uint32_t> mask(words, 0);
  // Reserved above: released again if the walk fails (the automaton's memory may run out).
  try {
    top_positions_.clear();
    automaton_.add_top_positions(state, top_positions_);
    std::sort(top_positions_.begin(), top_positions_.end());
    top_positions_.erase(std::unique(top_positions_.begin(), top_positions_.end()),
                         top_positions_.end());
    bool walk_all = false;
    undecided_.clear();
    for (int32_t position : top_positions_) {
      const PositionTokens& tokens = decided(position);
      if (tokens.walk_all) {
        walk_all = true;
        break;
      }
      tokens.add_accepted(mask);
      undecided_.insert(undecided_.end(), tokens.undecided.begin(), tokens.undecided.end());
    }
    if (walk_all) {
      std::fill(mask.begin(), mask.end(), 0u);
      if (vocabulary.num_nodes() > 0) walk_trie(state, 0, vocabulary.num_nodes(), mask);
    } else {
      ++statistics_.masks_from_positions;
      std::sort(undecided_.begin(), undecided_.end());
      undecided_.erase(std::unique(undecided_.begin(), undecided_.end()), undecided_.end());
      for (int32_t node : undecided_) walk_subtree(state, node, mask);
    }
  } catch (...) {
    if (memory_ != nullptr) memory_->release(bytes);
    throw;
  }
  mask_bytes_ += bytes;
  return masks_.emplace(state, std::move(mask)).first->second;
}

bool GrammarMatcher::accept(int32_t token) {
  const GrammarStateId next = grammar_->advance(state_, token);
  if (next == GrammarAutomaton::kDead) return false;
  state_ = next;
  return true;
}

void GrammarMatcher::fill_mask(std::span<uint32_t> words, std::span<const int32_t> end_ids) const {
  std::fill(words.begin(), words.end(), 0u);
  grammar_->fill_mask(state_, words);
  if (!accepts()) return;
  for (int32_t id : end_ids)
    if (id >= 0 && static_cast<size_t>(id) / 32 < words.size())
      words[static_cast<size_t>(id) / 32] |= 1u << (static_cast<uint32_t>(id) % 32);
}

}  // namespace tessera
