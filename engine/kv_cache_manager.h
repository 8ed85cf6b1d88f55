// The KV cache's blocks, owned by whoever schedules sequences (the scheduler; the generator is a
// scheduler of one): a fixed pool of blocks of block_size tokens handed out per sequence. Blocks
// are reference-counted so that several sequences can hold one block (prefix caching, forks); a
// block returns to the free pool when its last holder frees it. The runner owns only the memory.
//
// Prefix caching (vLLM's automatic prefix caching): a full block is known by the hash of its
// tokens and of every token before it. A free block keeps its contents and its hash until the
// pool hands it out again, least recently freed first, so a later prompt with the same prefix
// takes those blocks back instead of computing them.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace tessera {

using SequenceId = int64_t;

class KVCacheManager {
 public:
  KVCacheManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching = false);

  // Blocks of block_size tokens that hold num_tokens tokens.
  static int64_t blocks_for(int64_t num_tokens, int64_t block_size);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return static_cast<int64_t>(reference_counts_.size()); }
  // Blocks no sequence holds (cached ones included: they are handed out when needed).
  int64_t num_free() const { return static_cast<int64_t>(free_order_.size()); }
  // The share of blocks some sequence holds, in [0, 1].
  double usage() const;
  bool prefix_caching() const { return prefix_caching_; }

  // True when the sequence's table can grow to cover num_tokens with the free blocks.
  bool can_allocate(SequenceId sequence, int64_t num_tokens) const;
  // Grows the sequence's block table (creating it on first use) to cover num_tokens tokens.
  // Throws, changing nothing, when too few blocks are free.
  void allocate(SequenceId sequence, int64_t num_tokens);
  // Shrinks the sequence's table to the blocks num_tokens tokens need, giving the rest back (the
  // slots of proposed tokens that speculative decoding rejected).
  void trim(SequenceId sequence, int64_t num_tokens);

  // For a new sequence whose tokens are `tokens`: the leading tokens held by cached blocks (whole
  // blocks, and never all of `tokens`: the last one must be computed to give logits). 0 without
  // prefix caching.
  int64_t cached_prefix_tokens(std::span<const int32_t> tokens) const;
  // True when a new sequence can take its cached prefix and grow to num_tokens.
  bool can_allocate_prompt(std::span<const int32_t> tokens, int64_t num_tokens) const;
  // Starts a new sequence: takes the cached blocks of its prefix, then fresh ones up to
  // num_tokens; returns how many tokens the cached blocks hold. Throws, changing nothing, when too
  // few blocks are free.
  int64_t allocate_prompt(SequenceId sequence, std::span<const int32_t> tokens, int64_t num_tokens);
  // After the first num_computed of `tokens` are in the cache: remembers the sequence's full
  // blocks among them by hash, so later prompts can share them. No-op without prefix caching.
  void cache_blocks(SequenceId sequence, std::span<const int32_t> tokens, int64_t num_computed);

  // The sequence's blocks in token order (empty for an unknown sequence).
  std::span<const int32_t> block_table(SequenceId sequence) const;
  // Gives `child` the blocks of `parent` (shared: each gains a reference). `child` must be new.
  // Shared blocks are read-only: before either sequence appends into a shared partial last block,
  // it needs a copy of its own (the GPU decode kernel writes a new token's slot while other
  // sequences of the step may read theirs, so no slot may be in two sequences' tables).
  void fork(SequenceId parent, SequenceId child);
  // Drops the sequence's references; blocks no other sequence holds return to the pool, the
  // sequence's last blocks first so that its prefix stays cached longest.
  void free(SequenceId sequence);
  int32_t reference_count(int32_t block) const;

  // Prompt tokens asked about and found cached, since construction (the hit rate's terms).
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

 private:
  struct Table {
    std::vector<int32_t> blocks;
    std::vector<uint64_t> hashes;  // of the leading full blocks known to be computed
  };
  struct CachedBlock {
    bool valid = false;
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    std::vector<int32_t> tokens;
  };
  int64_t blocks_needed(SequenceId sequence, int64_t num_tokens) const;
  uint64_t block_hash(uint64_t parent_hash, std::span<const int32_t> tokens) const;
  // The cached block holding `tokens` after a prefix hashed parent_hash, or -1.
  int32_t find_cached(uint64_t parent_hash, std::span<const int32_t> tokens, uint64_t hash) const;
  // The cached blocks of a prompt's prefix, in order.
  std::vector<int32_t> prefix_blocks(std::span<const int32_t> tokens,
                                     std::vector<uint64_t>* hashes) const;
  int32_t take_free_block();
  void hold(int32_t block);  // one more holder; a free block leaves the pool
  void release(int32_t block);

  int64_t block_size_;
  bool prefix_caching_;
  std::vector<int32_t> reference_counts_;  // per block; 0: in the free pool
  std::list<int32_t> free_order_;          // free blocks, least recently freed first
  std::vector<std::list<int32_t>::iterator> free_position_;  // valid while the block is free
  std::vector<CachedBlock> cached_;                          // per block
  std::unordered_map<uint64_t, int32_t> cached_by_hash_;
  std::unordered_map<SequenceId, Table> tables_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace tessera
