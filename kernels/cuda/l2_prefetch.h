// Pulling the next GEMM's weight into L2 (compile/passes/weight_prefetch.cpp): at decode a GEMM's
// time is its weight's one pass through memory, and the small kernels between two GEMMs (norms,
// rope, attention) leave the memory idle. A skinny GEMM kernel (skinny_gemm.h) that ends by asking
// for the first bytes of the next weight lets them stream in behind those kernels. A hint: the
// hardware may drop it, and nothing waits for it. skinny_gemm_lab measures what it wins
// (docs/perf/decode_log.md: little, since the skinny kernels at decode sizes are bound by latency
// more than bandwidth).
//
// The library's GEMMs (cuBLASLt, at larger batches) do not prefetch: a launch of its own after
// them, the one way to add it, made a decode step 9% slower at batch 32 on the H100
// (docs/perf/decode_log.md).
#pragma once

#include <cstdint>

#include "runtime/host_device.h"
#include "runtime/tensor.h"

namespace tessera::gpu {

// Bytes [0, bytes) at `data`: 16-byte aligned, a multiple of 16 bytes; bytes == 0: nothing.
struct L2Prefetch {
  const void* data = nullptr;
  int64_t bytes = 0;
};

// Bytes [begin, end) of part `part` of `parts` near-equal parts of `bytes` (a multiple of 16):
// each part a multiple of 16 bytes long, so every request the kernels make is 16-byte aligned and
// sized; the parts cover [0, bytes) without overlap (the last ones may be empty).
struct L2PrefetchRange {
  int64_t begin = 0, end = 0;
};
TESSERA_HOST_DEVICE inline L2PrefetchRange l2_prefetch_range(int64_t bytes, int64_t part,
                                                             int64_t parts) {
  const int64_t share = (bytes / 16 + parts - 1) / parts * 16;
  const int64_t begin = part * share < bytes ? part * share : bytes;
  const int64_t end = begin + share < bytes ? begin + share : bytes;
  return {begin, end};
}

// At most this share of L2 is prefetched per GEMM. More is evicted before it is read, by the
// weight streaming past it: on the H100 (50 MiB) a sixth (8 MiB) made batch 1 and 8 2% faster and a
// third (16 MiB) gained nothing; a half, in a first version where every block prefetched, made
// batch 1 5% slower (docs/perf/decode_log.md).
inline constexpr size_t kL2PrefetchShare = 6;

// What to prefetch of `weight` (nullptr: nothing) on `device`: its first bytes, at most
// L2 / kL2PrefetchShare; nothing where the device has no bulk prefetch (compute capability below
// 9.0, or ROCm) or the data is not 16-byte aligned.
L2Prefetch l2_prefetch_of(const Tensor* weight, int device);

}  // namespace tessera::gpu
