#include "engine/block_allocator.h"

#include "kernels/check.h"

namespace tessera {

BlockAllocator::BlockAllocator(int64_t num_blocks, int64_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  TESSERA_REQUIRE(num_blocks > 0 && block_size > 0,
                  "the KV cache needs at least one block of at least one token (got {} blocks of "
                  "{} tokens)",
                  num_blocks, block_size);
  for (int64_t block = num_blocks - 1; block >= 0; --block)
    free_.push_back(static_cast<int32_t>(block));
}

bool BlockAllocator::ensure_capacity(std::vector<int32_t>& table, int64_t num_tokens) {
  int64_t needed =
      (num_tokens + block_size_ - 1) / block_size_ - static_cast<int64_t>(table.size());
  if (needed <= 0) return true;
  if (needed > num_free()) return false;
  for (int64_t i = 0; i < needed; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void BlockAllocator::release(std::vector<int32_t>& table) {
  for (int32_t block : table) free_.push_back(block);
  table.clear();
}

}  // namespace tessera
