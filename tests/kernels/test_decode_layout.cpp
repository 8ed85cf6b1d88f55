// The layout rule of the tensor-core decode attention kernel
// (kernels/cuda/attention/decode_layout.h): partitions per block and tile buffers per warp, on the
// H100's limits and the 1B model's shapes.
#include <gtest/gtest.h>

#include "kernels/cuda/attention/decode_layout.h"

namespace tessera::gpu::attention {
namespace {

constexpr int64_t kH100Sms = 132;
constexpr size_t kH100OptIn = 232448;  // 227 KiB
// One K and one V tile of 32 keys, rows padded by 8 elements, bf16.
constexpr size_t kHead64Buffer = 2 * 32 * (64 + 8) * 2;
constexpr size_t kHead128Buffer = 2 * 32 * (128 + 8) * 2;

void expect_layout(const DecodeLayout& layout, int buffers, int warps, int block_partitions) {
  EXPECT_EQ(layout.tile_buffers, buffers);
  EXPECT_EQ(layout.warps_per_block, warps);
  EXPECT_EQ(layout.block_partitions, block_partitions);
}

TEST(DecodeLayout, ShortContextsMergeEveryPartitionInOneBlockWithFourBuffers) {
  // Batch 1 and 32 of the 1B model (8 kv heads) in a 256-key graph: 4 and 2 partitions.
  expect_layout(choose_decode_layout(8, 4, kHead64Buffer, kH100Sms, kH100OptIn), 4, 4, 1);
  expect_layout(choose_decode_layout(256, 2, kHead64Buffer, kH100Sms, kH100OptIn), 4, 2, 1);
}

TEST(DecodeLayout, FewerBuffersWhenFourWouldTakeASecondWave) {
  // Batch 128: 1024 one-warp blocks; four buffers each (36 KiB) need 37.7 MB against the 30.7
  // MB of 132 SMs, three (27 KiB) fit.
  expect_layout(choose_decode_layout(1024, 1, kHead64Buffer, kH100Sms, kH100OptIn), 3, 1, 1);
  // Nothing fits: the fewest buffers.
  expect_layout(choose_decode_layout(1 << 16, 1, kHead64Buffer, kH100Sms, kH100OptIn), 2, 1, 1);
}

TEST(DecodeLayout, WarpsPerBlockStopAtWhatABlocksSharedMemoryHolds) {
  // 33 partitions (batch 1 in a 131072-key graph): four buffers of head 64 fit 6 warps, so six
  // blocks of six warps (the combine kernel merges them).
  expect_layout(choose_decode_layout(8, 33, kHead64Buffer, kH100Sms, kH100OptIn), 4, 6, 6);
  // Head 128: four buffers (68 KiB per warp) fit 3 warps.
  expect_layout(choose_decode_layout(16, 17, kHead128Buffer, kH100Sms, kH100OptIn), 4, 3, 6);
  // At most eight warps, however much memory there is.
  expect_layout(choose_decode_layout(1, 40, 1024, kH100Sms, kH100OptIn), 4, 8, 5);
}

TEST(DecodeLayout, EveryLayoutCoversItsPartitionsAndFitsABlock) {
  for (size_t buffer : {kHead64Buffer, kHead128Buffer}) {
    for (int64_t blocks : {1, 8, 64, 256, 1024, 4096}) {
      for (int64_t partitions : {0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 256}) {
        const DecodeLayout layout =
            choose_decode_layout(blocks, partitions, buffer, kH100Sms, kH100OptIn);
        EXPECT_GE(layout.tile_buffers, kDecodeMmaMinBuffers);
        EXPECT_LE(layout.tile_buffers, kDecodeMmaMaxBuffers);
        EXPECT_GE(layout.warps_per_block, 1);
        EXPECT_LE(layout.warps_per_block, kDecodeMmaMaxWarps);
        EXPECT_GE(int64_t{layout.warps_per_block} * layout.block_partitions,
                  std::max<int64_t>(partitions, 1));
        EXPECT_LT(int64_t{layout.warps_per_block} * (layout.block_partitions - 1),
                  std::max<int64_t>(partitions, 1))
            << "a block with no partition";
        EXPECT_LE(layout.warps_per_block * layout.tile_buffers * buffer, kH100OptIn);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::gpu::attention
