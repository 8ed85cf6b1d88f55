// The device half of kernels/cuda/gemm/l2_prefetch.h.
#pragma once

#include "kernels/cuda/gemm/l2_prefetch.h"

namespace tessera::gpu {

// Issues part `part` of `parts` parts of `prefetch` (l2_prefetch_range), spread over the calling
// threads (`thread` of `threads`) in bulk requests of up to 4 KB. Sm_90's cp.async.bulk.prefetch.L2
// has the TMA unit fetch the bytes: the threads do not wait for them.
__device__ __forceinline__ void prefetch_to_l2(const L2Prefetch& prefetch, int64_t part,
                                               int64_t parts, int thread, int threads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(TESSERA_GPU_HIP)
  if (prefetch.bytes <= 0) return;
  constexpr int64_t kRequest = 4096;
  const L2PrefetchRange range = l2_prefetch_range(prefetch.bytes, part, parts);
  const char* base = static_cast<const char*>(prefetch.data);
  for (int64_t offset = range.begin + thread * kRequest; offset < range.end;
       offset += threads * kRequest) {
    const uint32_t size = static_cast<uint32_t>(min(kRequest, range.end - offset));
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + offset), "r"(size)
                 : "memory");
  }
#else
  (void)prefetch, (void)part, (void)parts, (void)thread, (void)threads;
#endif
}

}  // namespace tessera::gpu
