// The KV cache's blocks, owned by whoever schedules sequences (the generator today, the serving
// scheduler later): a fixed pool of blocks of block_size tokens handed out per sequence. Blocks
// are reference-counted so that several sequences can hold one block (prefix caching, forks); a
// block returns to the pool when its last holder frees it. The runner owns only the cache memory.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace tessera {

using SequenceId = int64_t;

class KVCacheManager {
 public:
  KVCacheManager(int64_t num_blocks, int64_t block_size);

  // Blocks of block_size tokens that hold num_tokens tokens.
  static int64_t blocks_for(int64_t num_tokens, int64_t block_size);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return static_cast<int64_t>(reference_counts_.size()); }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }

  // True when the sequence's table can grow to cover num_tokens with the free blocks.
  bool can_allocate(SequenceId sequence, int64_t num_tokens) const;
  // Grows the sequence's block table (creating it on first use) to cover num_tokens tokens.
  // Throws, changing nothing, when too few blocks are free.
  void allocate(SequenceId sequence, int64_t num_tokens);
  // The sequence's blocks in token order (empty for an unknown sequence).
  std::span<const int32_t> block_table(SequenceId sequence) const;
  // Gives `child` the blocks of `parent` (shared: each gains a reference). `child` must be new.
  void fork(SequenceId parent, SequenceId child);
  // Drops the sequence's references; blocks no other sequence holds return to the pool.
  void free(SequenceId sequence);
  int32_t reference_count(int32_t block) const;

 private:
  int64_t blocks_needed(SequenceId sequence, int64_t num_tokens) const;

  int64_t block_size_;
  std::vector<int32_t> reference_counts_;  // per block; 0: in the free pool
  std::vector<int32_t> free_;              // taken from the back, lowest id first
  std::unordered_map<SequenceId, std::vector<int32_t>> tables_;
};

}  // namespace tessera
