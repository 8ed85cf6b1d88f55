#include "engine/kv_cache_manager.h"

#include <algorithm>

#include "runtime/check.h"
#include "runtime/mix64.h"

namespace tessera {
namespace {

constexpr int64_t max_blocks = int64_t{1} << 31;  // block ids are int32

}  // namespace

KVCacheManager::KVCacheManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching) {
  TESSERA_REQUIRE(num_blocks > 0 && block_size > 0,
                  "the KV cache needs at least one block of at least one token (got {} blocks of "
                  "{} tokens); set engine.num_kv_blocks and engine.block_size to positive values",
                  num_blocks, block_size);
  TESSERA_REQUIRE(num_blocks < max_blocks, "engine.num_kv_blocks = {} is above the limit {}",
                  num_blocks, max_blocks - 1);
  reference_counts_.assign(static_cast<size_t>(num_blocks), 0);
  free_position_.resize(static_cast<size_t>(num_blocks));
  cached_.resize(static_cast<size_t>(num_blocks));
  for (int64_t block = 0; block < num_blocks; ++block)
    free_position_[static_cast<size_t>(block)] =
        free_order_.insert(free_order_.end(), static_cast<int32_t>(block));
}

int64_t KVCacheManager::blocks_for(int64_t num_tokens, int64_t block_size) {
  TESSERA_CHECK(num_tokens >= 0 && block_size > 0);
  return num_tokens / block_size + (num_tokens % block_size != 0 ? 1 : 0);
}

double KVCacheManager::usage() const {
  return 1.0 - static_cast<double>(num_free()) / static_cast<double>(num_blocks());
}

int64_t KVCacheManager::blocks_needed(SequenceId sequence, int64_t num_tokens) const {
  auto it = tables_.find(sequence);
  int64_t held = it == tables_.end() ? 0 : static_cast<int64_t>(it->second.blocks.size());
  return std::max<int64_t>(blocks_for(num_tokens, block_size_) - held, 0);
}

bool KVCacheManager::can_allocate(SequenceId sequence, int64_t num_tokens) const {
  return blocks_needed(sequence, num_tokens) <= num_free();
}

int32_t KVCacheManager::take_free_block() {
  TESSERA_CHECK(!free_order_.empty());
  int32_t block = free_order_.front();
  free_order_.pop_front();
  CachedBlock& cached = cached_[static_cast<size_t>(block)];
  if (cached.valid) {  // evicted: its contents will be overwritten
    cached_by_hash_.erase(cached.hash);
    cached = CachedBlock{};
  }
  reference_counts_[static_cast<size_t>(block)] = 1;
  return block;
}

void KVCacheManager::hold(int32_t block) {
  int32_t& count = reference_counts_[static_cast<size_t>(block)];
  if (count == 0) free_order_.erase(free_position_[static_cast<size_t>(block)]);
  ++count;
}

void KVCacheManager::release(int32_t block) {
  int32_t& count = reference_counts_[static_cast<size_t>(block)];
  TESSERA_CHECK(count > 0, "block {} freed more often than it was held", block);
  if (--count == 0)
    free_position_[static_cast<size_t>(block)] = free_order_.insert(free_order_.end(), block);
}

void KVCacheManager::allocate(SequenceId sequence, int64_t num_tokens) {
  int64_t needed = blocks_needed(sequence, num_tokens);
  TESSERA_REQUIRE(needed <= num_free(),
                  "the KV cache is out of blocks: sequence {} needs {} more block(s) of {} tokens "
                  "to hold {} tokens, but {} of {} are free; raise engine.num_kv_blocks or lower "
                  "engine.max_model_len",
                  sequence, needed, block_size_, num_tokens, num_free(), num_blocks());
  std::vector<int32_t>& table = tables_[sequence].blocks;
  for (int64_t i = 0; i < needed; ++i) table.push_back(take_free_block());
}

void KVCacheManager::trim(SequenceId sequence, int64_t num_tokens) {
  auto it = tables_.find(sequence);
  if (it == tables_.end()) return;
  Table& table = it->second;
  const auto keep = static_cast<size_t>(blocks_for(num_tokens, block_size_));
  while (table.blocks.size() > keep) {
    release(table.blocks.back());
    table.blocks.pop_back();
  }
  if (table.hashes.size() > keep) table.hashes.resize(keep);
}

uint64_t KVCacheManager::block_hash(uint64_t parent_hash, std::span<const int32_t> tokens) const {
  uint64_t hash = mix64(parent_hash ^ 0x5851F42D4C957F2Dull);
  for (int32_t token : tokens) hash = mix64(hash ^ static_cast<uint32_t>(token));
  return hash;
}

int32_t KVCacheManager::find_cached(uint64_t parent_hash, std::span<const int32_t> tokens,
                                    uint64_t hash) const {
  auto it = cached_by_hash_.find(hash);
  if (it == cached_by_hash_.end()) return -1;
  const CachedBlock& cached = cached_[static_cast<size_t>(it->second)];
  // The hash names the block; the comparison makes a collision a miss, never wrong text.
  bool same = cached.parent_hash == parent_hash &&
              std::equal(tokens.begin(), tokens.end(), cached.tokens.begin(), cached.tokens.end());
  return same ? it->second : -1;
}

std::vector<int32_t> KVCacheManager::prefix_blocks(std::span<const int32_t> tokens,
                                                   std::vector<uint64_t>* hashes) const {
  std::vector<int32_t> blocks;
  if (!prefix_caching_ || tokens.empty()) return blocks;
  const size_t block = static_cast<size_t>(block_size_);
  const size_t full = (tokens.size() - 1) / block;  // the last token is always computed
  uint64_t parent = 0;
  for (size_t i = 0; i < full; ++i) {
    auto span = tokens.subspan(i * block, block);
    uint64_t hash = block_hash(parent, span);
    int32_t found = find_cached(parent, span, hash);
    if (found < 0) break;
    blocks.push_back(found);
    if (hashes) hashes->push_back(hash);
    parent = hash;
  }
  return blocks;
}

int64_t KVCacheManager::cached_prefix_tokens(std::span<const int32_t> tokens) const {
  return static_cast<int64_t>(prefix_blocks(tokens, nullptr).size()) * block_size_;
}

bool KVCacheManager::can_allocate_prompt(std::span<const int32_t> tokens,
                                         int64_t num_tokens) const {
  std::vector<int32_t> hits = prefix_blocks(tokens, nullptr);
  int64_t hits_in_pool = std::count_if(hits.begin(), hits.end(), [&](int32_t block) {
    return reference_counts_[static_cast<size_t>(block)] == 0;
  });
  int64_t fresh =
      std::max<int64_t>(blocks_for(num_tokens, block_size_) - static_cast<int64_t>(hits.size()), 0);
  return fresh + hits_in_pool <= num_free();
}

int64_t KVCacheManager::allocate_prompt(SequenceId sequence, std::span<const int32_t> tokens,
                                        int64_t num_tokens) {
  TESSERA_CHECK(tables_.count(sequence) == 0, "sequence {} already holds blocks", sequence);
  TESSERA_REQUIRE(can_allocate_prompt(tokens, num_tokens),
                  "the KV cache is out of blocks: sequence {} needs {} block(s) of {} tokens, but "
                  "{} of {} are free; raise engine.num_kv_blocks or lower engine.max_model_len",
                  sequence, blocks_for(num_tokens, block_size_), block_size_, num_free(),
                  num_blocks());
  Table table;
  std::vector<int32_t> hits = prefix_blocks(tokens, &table.hashes);
  for (int32_t block : hits) hold(block);
  table.blocks = hits;
  tables_[sequence] = std::move(table);
  allocate(sequence, num_tokens);
  const int64_t cached = static_cast<int64_t>(hits.size()) * block_size_;
  if (prefix_caching_) {
    prefix_query_tokens_ += static_cast<int64_t>(tokens.size());
    prefix_hit_tokens_ += cached;
  }
  return cached;
}

void KVCacheManager::cache_blocks(SequenceId sequence, std::span<const int32_t> tokens,
                                  int64_t num_computed) {
  if (!prefix_caching_) return;
  auto it = tables_.find(sequence);
  TESSERA_CHECK(it != tables_.end(), "sequence {} holds no blocks", sequence);
  Table& table = it->second;
  const size_t block = static_cast<size_t>(block_size_);
  const size_t full = std::min(static_cast<size_t>(num_computed), tokens.size()) / block;
  TESSERA_CHECK(full <= table.blocks.size());
  while (table.hashes.size() < full) {
    size_t index = table.hashes.size();
    uint64_t parent = index == 0 ? 0 : table.hashes.back();
    auto span = tokens.subspan(index * block, block);
    uint64_t hash = block_hash(parent, span);
    table.hashes.push_back(hash);
    int32_t id = table.blocks[index];
    CachedBlock& cached = cached_[static_cast<size_t>(id)];
    if (cached.valid || cached_by_hash_.count(hash)) continue;  // known already (maybe elsewhere)
    cached = CachedBlock{true, hash, parent, std::vector<int32_t>(span.begin(), span.end())};
    cached_by_hash_[hash] = id;
  }
}

std::span<const int32_t> KVCacheManager::block_table(SequenceId sequence) const {
  auto it = tables_.find(sequence);
  if (it == tables_.end()) return {};
  return it->second.blocks;
}

void KVCacheManager::fork(SequenceId parent, SequenceId child) {
  TESSERA_REQUIRE(tables_.count(child) == 0, "fork: sequence {} already holds blocks", child);
  Table shared;
  auto it = tables_.find(parent);
  if (it != tables_.end()) shared = it->second;
  for (int32_t block : shared.blocks) hold(block);
  tables_[child] = std::move(shared);
}

void KVCacheManager::free(SequenceId sequence) {
  auto it = tables_.find(sequence);
  if (it == tables_.end()) return;
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto block = blocks.rbegin(); block != blocks.rend(); ++block) release(*block);
  tables_.erase(it);
}

int32_t KVCacheManager::reference_count(int32_t block) const {
  TESSERA_REQUIRE(block >= 0 && block < num_blocks(), "block {} is outside the pool of {} blocks",
                  block, num_blocks());
  return reference_counts_[static_cast<size_t>(block)];
}

}  // namespace tessera
