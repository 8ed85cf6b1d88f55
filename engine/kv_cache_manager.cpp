#include "engine/kv_cache_manager.h"

#include <algorithm>

#include "kernels/check.h"

namespace tessera {

KVCacheManager::KVCacheManager(int64_t num_blocks, int64_t block_size) : block_size_(block_size) {
  TESSERA_REQUIRE(num_blocks > 0 && block_size > 0,
                  "the KV cache needs at least one block of at least one token (got {} blocks of "
                  "{} tokens); set engine.num_kv_blocks and engine.block_size to positive values",
                  num_blocks, block_size);
  reference_counts_.assign(static_cast<size_t>(num_blocks), 0);
  for (int64_t block = num_blocks - 1; block >= 0; --block)
    free_.push_back(static_cast<int32_t>(block));
}

int64_t KVCacheManager::blocks_for(int64_t num_tokens, int64_t block_size) {
  TESSERA_CHECK(num_tokens >= 0 && block_size > 0);
  return (num_tokens + block_size - 1) / block_size;
}

int64_t KVCacheManager::blocks_needed(SequenceId sequence, int64_t num_tokens) const {
  auto it = tables_.find(sequence);
  int64_t held = it == tables_.end() ? 0 : static_cast<int64_t>(it->second.size());
  return std::max<int64_t>(blocks_for(num_tokens, block_size_) - held, 0);
}

bool KVCacheManager::can_allocate(SequenceId sequence, int64_t num_tokens) const {
  return blocks_needed(sequence, num_tokens) <= num_free();
}

void KVCacheManager::allocate(SequenceId sequence, int64_t num_tokens) {
  int64_t needed = blocks_needed(sequence, num_tokens);
  TESSERA_REQUIRE(needed <= num_free(),
                  "the KV cache is out of blocks: sequence {} needs {} more block(s) of {} tokens "
                  "to hold {} tokens, but {} of {} are free; raise engine.num_kv_blocks or lower "
                  "engine.max_model_len",
                  sequence, needed, block_size_, num_tokens, num_free(), num_blocks());
  std::vector<int32_t>& table = tables_[sequence];
  for (int64_t i = 0; i < needed; ++i) {
    int32_t block = free_.back();
    free_.pop_back();
    reference_counts_[static_cast<size_t>(block)] = 1;
    table.push_back(block);
  }
}

std::span<const int32_t> KVCacheManager::block_table(SequenceId sequence) const {
  auto it = tables_.find(sequence);
  if (it == tables_.end()) return {};
  return it->second;
}

void KVCacheManager::fork(SequenceId parent, SequenceId child) {
  TESSERA_REQUIRE(tables_.count(child) == 0, "fork: sequence {} already holds blocks", child);
  std::vector<int32_t> shared(block_table(parent).begin(), block_table(parent).end());
  for (int32_t block : shared) ++reference_counts_[static_cast<size_t>(block)];
  tables_[child] = std::move(shared);
}

void KVCacheManager::free(SequenceId sequence) {
  auto it = tables_.find(sequence);
  if (it == tables_.end()) return;
  for (int32_t block : it->second) {
    int32_t& count = reference_counts_[static_cast<size_t>(block)];
    TESSERA_CHECK(count > 0, "block {} freed more often than it was held", block);
    if (--count == 0) free_.push_back(block);
  }
  tables_.erase(it);
}

int32_t KVCacheManager::reference_count(int32_t block) const {
  TESSERA_REQUIRE(block >= 0 && block < num_blocks(), "block {} is outside the pool of {} blocks",
                  block, num_blocks());
  return reference_counts_[static_cast<size_t>(block)];
}

}  // namespace tessera
