#include "engine/structured_output/compiled_grammar.h"

#include <algorithm>

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
}

CompiledGrammar::~CompiledGrammar() {
  drop_masks();
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
  return result;
}

void CompiledGrammar::fill_mask(GrammarStateId state, std::span<uint32_t> words) {
  std::lock_guard lock(mutex_);
  const std::vector<uint32_t>& mask = mask_of(state);
  TESSERA_CHECK(words.size() == mask.size(), "a token mask of {} words for {}", words.size(),
                mask.size());
  for (size_t i = 0; i < words.size(); ++i) words[i] |= mask[i];
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
    // One pass over the trie in depth-first order: a node's state is its parent's advanced by its
    // byte; a rejected node skips its whole subtree.
    walk_states_.assign(vocabulary.max_depth() + 1, GrammarAutomaton::kDead);
    walk_states_[0] = state;
    const size_t nodes = vocabulary.num_nodes();
    for (size_t node = 0; node < nodes;) {
      const size_t depth = vocabulary.depth(node);
      const GrammarStateId next =
          automaton_.advance(walk_states_[depth - 1], vocabulary.byte(node));
      if (next == GrammarAutomaton::kDead) {
        node = vocabulary.subtree_end(node);
        continue;
      }
      walk_states_[depth] = next;
      for (int32_t token : vocabulary.tokens_at(node))
        mask[static_cast<size_t>(token) / 32] |= 1u << (static_cast<uint32_t>(token) % 32);
      ++node;
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
