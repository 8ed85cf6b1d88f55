// Tessera's own GEMM kernels, written once for both GPU vendors (the warp or wavefront width is a
// template parameter of the kernels, not a second copy): a tiled GEMM for prefill and every
// matmul, and a skinny kernel for linear layers over a few rows (decode), one warp per output
// column streaming its weight row. Both accumulate in f32 and round once; linear's bias is added
// in f32 before that rounding, as on the CPU.
//
// The HIP module registers them as the matmul and linear kernels (ROCm as Debian ships it has no
// BLAS). The CUDA module builds them too, for the gpu tests and bench/portable_gemm_lab, and keeps
// cuBLASLt for its own matmul and linear. Callers link the module (these are not in the core).
#pragma once

#include <cstdint>

#include "runtime/tensor.h"

namespace tessera::gpu {

enum class PortableGemmKernel {
  automatic,  // skinny up to kSkinnyMaxRows rows of a linear, tiled otherwise
  tiled,
  skinny,  // linear only, at most kSkinnyMaxRows rows
};

inline constexpr int64_t kSkinnyMaxRows = 8;

// out[..., M, N] = a[..., M, K] @ b, b [K, N] or batched [..., K, N] (the matmul kernel contract,
// kernels/kernel_checks.h).
void portable_matmul(const Tensor& a, const Tensor& b, const Tensor& out);

// out[..., N] = x[..., K] @ weight[N, K]^T (+ bias[N]).
void portable_linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out,
                     PortableGemmKernel kernel = PortableGemmKernel::automatic);

}  // namespace tessera::gpu
