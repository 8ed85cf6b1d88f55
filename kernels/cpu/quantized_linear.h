// linear and embedding with a quantized weight (runtime/dtype.h's block formats) on the CPU. The
// weight stays in its blocks: decode rows take dot products straight from them against the
// activation quantized to 8 bits per 32 (kernels/quant/activation_blocks.h), threaded over output
// rows; more rows (prefill) dequantize a tile of weight rows at a time and run the f32 GEMM on it.
#pragma once

#include "runtime/tensor.h"

namespace tessera::cpu {

// Rows of x up to which the dot products run; past it, dequantized tiles and the GEMM.
inline constexpr int64_t kQuantizedDotMaxRows = 8;

// out[..., N] = x[..., K] @ weight[N, K]^T (+ bias), weight quantized; arguments already checked.
void quantized_linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out);

// out[i, :] = the dequantized row ids[i] of a quantized table (f32); `rows` are already checked
// (-1: a zero row, for an id outside a shard).
void quantized_embedding(const Tensor& weight, const int64_t* rows, int64_t count,
                         const Tensor& out);

}  // namespace tessera::cpu
