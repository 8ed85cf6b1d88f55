// Pair merges over token ids: the core of every BPE tokenizer here. HF's BPE merges the pair of
// lowest rank; sentencepiece's BPE (and llama2.c's encoder) the pair whose merged piece has the
// highest score. Both are "lowest priority first, leftmost on ties", so one table serves both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {

class MergeTable {
 public:
  struct Merge {
    int32_t merged_id;
    float priority;  // rank (HF) or -score (sentencepiece); lower merges first
  };

  void reserve(size_t merge_count);
  // Adds or replaces (a later merge of the same pair wins, as in HF's BPE) the merge of
  // (left_id, right_id).
  void insert(int32_t left_id, int32_t right_id, Merge merge);
  // Adds the merge only when the pair has none yet.
  void insert_if_absent(int32_t left_id, int32_t right_id, Merge merge);
  const Merge* find(int32_t left_id, int32_t right_id) const;
  size_t size() const { return size_; }

  // Merges `ids` in place: repeatedly the adjacent pair with the lowest priority, the leftmost
  // among equals, until no adjacent pair has a merge.
  void apply(std::vector<int32_t>& ids) const;

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};

  static uint64_t pack(int32_t left_id, int32_t right_id) {
    return (uint64_t{static_cast<uint32_t>(left_id)} << 32) | static_cast<uint32_t>(right_id);
  }
  size_t slot_index(uint64_t key) const;
  void grow();
  void apply_small(std::vector<int32_t>& ids) const;
  void apply_large(std::vector<int32_t>& ids) const;

  // Open addressing with linear probing; the capacity is a power of two, at most half full.
  std::vector<Slot> slots_;
  size_t size_ = 0;
  int shift_ = 64;
};

}  // namespace tessera
