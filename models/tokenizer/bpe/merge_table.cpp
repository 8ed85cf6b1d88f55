#include "models/tokenizer/bpe/merge_table.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace tessera {

void MergeTable::reserve(size_t merge_count) {
  const size_t wanted = std::bit_ceil(std::max<size_t>(16, merge_count * 2));
  if (wanted <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(wanted, Slot{kEmptyKey, {}});
  shift_ = 64 - std::countr_zero(wanted);
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.key != kEmptyKey) {
      slots_[slot_index(slot.key)] = slot;
      ++size_;
    }
  }
}

size_t MergeTable::slot_index(uint64_t key) const {
  // Fibonacci hashing spreads the packed id pair; probe until the key or an empty slot.
  const size_t mask = slots_.size() - 1;
  size_t index = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  while (slots_[index].key != kEmptyKey && slots_[index].key != key) index = (index + 1) & mask;
  return index;
}

void MergeTable::grow() {
  reserve(std::max<size_t>(size_ + 1, slots_.size()));
}

void MergeTable::insert(int32_t left_id, int32_t right_id, Merge merge) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pack(left_id, right_id);
  Slot& slot = slots_[slot_index(key)];
  if (slot.key == kEmptyKey) ++size_;
  slot = {key, merge};
}

void MergeTable::insert_if_absent(int32_t left_id, int32_t right_id, Merge merge) {
  if (find(left_id, right_id) == nullptr) insert(left_id, right_id, merge);
}

const MergeTable::Merge* MergeTable::find(int32_t left_id, int32_t right_id) const {
  if (size_ == 0) return nullptr;
  const Slot& slot = slots_[slot_index(pack(left_id, right_id))];
  return slot.key == kEmptyKey ? nullptr : &slot.merge;
}

void MergeTable::apply(std::vector<int32_t>& ids) const {
  if (ids.size() < 2 || size_ == 0) return;
  // Pre-tokenized words are short: a rescan of cached pair priorities beats a heap there.
  if (ids.size() <= 64) {
    apply_small(ids);
  } else {
    apply_large(ids);
  }
}

void MergeTable::apply_small(std::vector<int32_t>& ids) const {
  constexpr float kNoMerge = std::numeric_limits<float>::infinity();
  // pair_priority[i] and pair_merged[i] describe the pair (ids[i], ids[i + 1]).
  float pair_priority[64];
  int32_t pair_merged[64];
  const auto lookup = [&](size_t i) {
    const Merge* merge = find(ids[i], ids[i + 1]);
    pair_priority[i] = merge ? merge->priority : kNoMerge;
    pair_merged[i] = merge ? merge->merged_id : -1;
  };
  size_t count = ids.size();
  for (size_t i = 0; i + 1 < count; ++i) lookup(i);
  while (count > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < count; ++i) {
      if (pair_priority[i] < pair_priority[best]) best = i;  // strict: leftmost wins ties
    }
    if (pair_priority[best] == kNoMerge) break;
    ids[best] = pair_merged[best];
    // Remove ids[best + 1] and the pair entry that started there.
    for (size_t i = best + 1; i + 1 < count; ++i) {
      ids[i] = ids[i + 1];
      pair_priority[i] = pair_priority[i + 1];
      pair_merged[i] = pair_merged[i + 1];
    }
    --count;
    if (best > 0) lookup(best - 1);
    if (best + 1 < count) lookup(best);
  }
  ids.resize(count);
}

void MergeTable::apply_large(std::vector<int32_t>& ids) const {
  // A doubly linked list of symbols and a min-heap of candidate merges, invalidated lazily: a
  // popped candidate is used only when both of its symbols are still what they were.
  struct Symbol {
    int32_t id;
    int32_t previous, next;
  };
  struct Candidate {
    float priority;
    int32_t left;  // index of the left symbol; the list keeps the original order
    int32_t left_id, right_id, merged_id;
    bool operator>(const Candidate& other) const {
      return priority != other.priority ? priority > other.priority : left > other.left;
    }
  };
  const int32_t count = static_cast<int32_t>(ids.size());
  std::vector<Symbol> symbols(count);
  for (int32_t i = 0; i < count; ++i) symbols[i] = {ids[i], i - 1, i + 1 < count ? i + 1 : -1};
  std::vector<Candidate> heap;
  heap.reserve(count);
  const auto push_candidate = [&](int32_t left) {
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    const Merge* merge = find(symbols[left].id, symbols[right].id);
    if (merge == nullptr) return;
    heap.push_back({merge->priority, left, symbols[left].id, symbols[right].id, merge->merged_id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>{});
  };
  for (int32_t i = 0; i + 1 < count; ++i) push_candidate(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate candidate = heap.back();
    heap.pop_back();
    Symbol& left = symbols[candidate.left];
    if (left.id != candidate.left_id || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != candidate.right_id) continue;
    left.id = candidate.merged_id;
    const int32_t after = right.next;
    right.id = -1;  // dead
    left.next = after;
    if (after >= 0) symbols[after].previous = candidate.left;
    if (left.previous >= 0) push_candidate(left.previous);
    push_candidate(candidate.left);
  }
  ids.clear();
  for (int32_t i = 0; i >= 0 && i < count; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace tessera
