// The KV cache's blocks: a fixed pool handed out to sequences, block_size tokens each.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

class BlockAllocator {
 public:
  BlockAllocator(int64_t num_blocks, int64_t block_size);
  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  // Grows `table` so it covers `num_tokens` tokens; false (and no change) when blocks run out.
  bool ensure_capacity(std::vector<int32_t>& table, int64_t num_tokens);
  void release(std::vector<int32_t>& table);

 private:
  int64_t num_blocks_;
  int64_t block_size_;
  std::vector<int32_t> free_;
};

}  // namespace tessera
