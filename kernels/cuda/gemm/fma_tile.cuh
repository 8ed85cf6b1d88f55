// The inner step of Tessera's f32-FMA tiled GEMMs (portable_gemm.cu, and fused_moe's tiled
// grouped GEMM): a slice of K staged in shared memory as f32, a[k][row] and b[k][column], each
// thread accumulating a kPerSide x kPerSide grid of outputs strided by kThreadsPerSide (rows
// ty + kThreadsPerSide i, columns tx + kThreadsPerSide j), so that the threads of a warp read
// shared memory without conflicts on either vendor.
#pragma once

#include "kernels/cuda/gpu_vendor.h"

namespace tessera::gpu {

template <int kSliceK, int kSide, int kThreadsPerSide, int kPerSide = kSide / kThreadsPerSide>
__device__ __forceinline__ void accumulate_fma_slice(const float (&a)[kSliceK][kSide],
                                                     const float (&b)[kSliceK][kSide], int tx,
                                                     int ty, float (&acc)[kPerSide][kPerSide]) {
#pragma unroll
  for (int k = 0; k < kSliceK; ++k) {
    float a_values[kPerSide], b_values[kPerSide];
#pragma unroll
    for (int i = 0; i < kPerSide; ++i) {
      a_values[i] = a[k][ty + kThreadsPerSide * i];
      b_values[i] = b[k][tx + kThreadsPerSide * i];
    }
#pragma unroll
    for (int i = 0; i < kPerSide; ++i) {
#pragma unroll
      for (int j = 0; j < kPerSide; ++j) acc[i][j] = fmaf(a_values[i], b_values[j], acc[i][j]);
    }
  }
}

}  // namespace tessera::gpu
