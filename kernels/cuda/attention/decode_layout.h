// How a launch of the tensor-core decode attention kernel (attention_decode_mma.cuh) is laid
// out: how many of a (kv head, sequence)'s key partitions share a block as its warps (merged in
// shared memory, so that a short context needs no combine kernel), and how many K/V tile buffers
// each warp pipelines. Plain C++, so that the rule is tested on the CPU (test_decode_layout).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace tessera::gpu::attention {

constexpr int kDecodeMmaMaxWarps = 8;    // partitions of one block, merged in shared memory
constexpr int kDecodeMmaMinBuffers = 2;  // K/V tile buffers per warp
constexpr int kDecodeMmaMaxBuffers = 4;

struct DecodeLayout {
  int tile_buffers = kDecodeMmaMinBuffers;
  int warps_per_block = 1;
  int block_partitions = 1;  // blocks per (kv head, sequence); more than one needs the combine
};

// `blocks`: (kv head, sequence) pairs; `partitions`: key partitions of each (decode_partitions);
// `buffer_bytes`: one K and one V tile of one warp. As many partitions share a block as fit the
// shared memory a block may opt into (at most kDecodeMmaMaxWarps), with the deepest tile
// pipeline with which every block of the launch is resident at once (an SM's shared memory
// counted as one block's most): deeper pipelines keep more of a warp's keys in flight, but past
// one wave blocks wait for each other (docs/performance.md "Decode attention").
inline DecodeLayout choose_decode_layout(int64_t blocks, int64_t partitions, size_t buffer_bytes,
                                         int64_t sm_count, size_t shared_bytes_optin) {
  partitions = std::max<int64_t>(partitions, 1);
  DecodeLayout layout;
  for (int buffers = kDecodeMmaMaxBuffers; buffers >= kDecodeMmaMinBuffers; --buffers) {
    const size_t warp_bytes = static_cast<size_t>(buffers) * buffer_bytes;
    const int64_t warps = std::max<int64_t>(
        1, std::min<int64_t>({partitions, kDecodeMmaMaxWarps,
                              static_cast<int64_t>(shared_bytes_optin / warp_bytes)}));
    const int64_t block_partitions = (partitions + warps - 1) / warps;
    const double launch_bytes = static_cast<double>(blocks) *
                                static_cast<double>(block_partitions * warps) *
                                static_cast<double>(warp_bytes);
    const double resident_bytes =
        static_cast<double>(sm_count) * static_cast<double>(shared_bytes_optin);
    layout = {buffers, static_cast<int>(warps), static_cast<int>(block_partitions)};
    if (launch_bytes <= resident_bytes) break;
  }
  return layout;
}

}  // namespace tessera::gpu::attention
