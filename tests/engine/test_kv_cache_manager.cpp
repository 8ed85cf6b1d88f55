// The KV-cache block manager: tables grow per sequence, blocks are shared by reference count and
// return to the pool with their last holder, and running out is a clear error that changes nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/kv_cache_manager.h"
#include "runtime/check.h"

using namespace tessera;
using ::testing::HasSubstr;

TEST(KVCacheManager, TablesGrowByBlockAndFreeReturnsBlocks) {
  KVCacheManager blocks(4, 16);
  EXPECT_EQ(KVCacheManager::blocks_for(33, 16), 3);
  EXPECT_EQ(blocks.num_free(), 4);
  blocks.allocate(7, 1);
  EXPECT_EQ(blocks.block_table(7).size(), 1u);
  blocks.allocate(7, 16);  // still one block
  EXPECT_EQ(blocks.block_table(7).size(), 1u);
  blocks.allocate(7, 17);
  EXPECT_EQ(blocks.block_table(7).size(), 2u);
  blocks.allocate(8, 20);
  EXPECT_EQ(blocks.num_free(), 0);
  std::vector<int32_t> all(blocks.block_table(7).begin(), blocks.block_table(7).end());
  all.insert(all.end(), blocks.block_table(8).begin(), blocks.block_table(8).end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<int32_t>{0, 1, 2, 3}));  // each block handed out once
  blocks.free(7);
  EXPECT_EQ(blocks.num_free(), 2);
  EXPECT_TRUE(blocks.block_table(7).empty());
  blocks.free(7);  // freeing an unknown sequence is a no-op
  EXPECT_EQ(blocks.num_free(), 2);
}

TEST(KVCacheManager, SharedBlocksReturnWithTheirLastHolder) {
  KVCacheManager blocks(4, 8);
  blocks.allocate(1, 16);
  blocks.fork(1, 2);
  int32_t first = blocks.block_table(1)[0];
  EXPECT_EQ(blocks.reference_count(first), 2);
  EXPECT_TRUE(std::equal(blocks.block_table(1).begin(), blocks.block_table(1).end(),
                         blocks.block_table(2).begin(), blocks.block_table(2).end()));
  EXPECT_EQ(blocks.num_free(), 2);
  blocks.free(1);
  EXPECT_EQ(blocks.num_free(), 2);  // sequence 2 still holds them
  EXPECT_EQ(blocks.reference_count(first), 1);
  blocks.free(2);
  EXPECT_EQ(blocks.num_free(), 4);
  EXPECT_EQ(blocks.reference_count(first), 0);
  blocks.allocate(3, 1);
  EXPECT_THROW(blocks.fork(1, 3), Error);  // the child must be new
}

TEST(KVCacheManager, RunningOutIsAClearErrorThatChangesNothing) {
  KVCacheManager blocks(2, 16);
  blocks.allocate(0, 10);
  EXPECT_TRUE(blocks.can_allocate(1, 16));
  EXPECT_FALSE(blocks.can_allocate(1, 17));
  try {
    blocks.allocate(1, 40);
    FAIL() << "allocating 3 blocks from 1 free should throw";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("out of blocks"));
    EXPECT_THAT(error.what(), HasSubstr("engine.num_kv_blocks"));
  }
  EXPECT_EQ(blocks.num_free(), 1);
  EXPECT_TRUE(blocks.block_table(1).empty());
  EXPECT_THROW(KVCacheManager(0, 16), Error);
  EXPECT_THROW(KVCacheManager(4, 0), Error);
  EXPECT_THROW(blocks.reference_count(2), Error);
}
