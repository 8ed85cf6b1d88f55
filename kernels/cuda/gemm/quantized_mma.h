// The quantized linear's tensor-core path (kernels/cuda/gemm/quantized_mma.cu), for x already
// quantized to 8 bits per block as the CPU quantizes it (quantized_linear.cu's quantize kernel):
// int8 mma.sync of x's quants with the weight's quants, each sub-block's integer sums times its
// scales in integers, one float scaling per block, as the CPU's dot products. For Q4_K, Q6_K and
// Q8_0 weights (the Q4_K_M and Q8_0 files) on CUDA; up to kQuantizedGemvMaxRows rows of x.
#pragma once

#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"
#include "runtime/dtype.h"

namespace tessera::gpu {

// x's rows quantized: an int8 per value, an f32 scale per 32 values (equal across a weight
// block), the int16 sum of the quants per 16 values.
struct QuantizedRows {
  const int8_t* quants;
  const float* scales;
  const int16_t* group_sums;
};

// Whether the tensor-core path takes weights of `dtype` (false on HIP).
bool quantized_mma_available(DType dtype);

// out[m, n] (x_dtype) = x @ weight^T (+ bias), weight [n, k] in `dtype`'s blocks (whole tensor,
// 16-byte aligned), m <= 64.
void launch_quantized_mma(DType dtype, DType x_dtype, int64_t m, int64_t n, int64_t k,
                          const uint8_t* weight, const QuantizedRows& x, const void* bias,
                          void* out, gpuStream_t stream, int device);

}  // namespace tessera::gpu
