// linear and embedding with a quantized weight (ggml block formats) on the GPU. Three paths for
// linear, chosen per shape by measurement (ColdTimer, as the skinny GEMM choice) on its first call
// outside a graph capture, kept for the process and in the measured-choice store:
//   gemv (x rows <= kQuantizedGemvMaxRows): each warp streams one weight row; for every format
//     but Q2_K and Q3_K a kernel first quantizes x (8 bits per block, as the CPU quantizes it)
//     and the row's blocks meet it in integer dot products (dp4a); for those two the values are
//     dequantized in registers against the rows of x (read through L1), f32 sums;
//   mma (x rows <= kQuantizedGemvMaxRows; Q4_K, Q6_K, Q8_0 on CUDA): x quantized the same way,
//     int8 tensor-core products of 8 weight rows with all of x's rows (quantized_mma.h);
//   tiles: rows of the weight dequantized to x's dtype a tile at a time, each tile's product by
//     the library GEMM (linear's own dense path), no copy of the whole weight.
// Their scratch (the quantized x, the tiles) is kept per device and stream, never freed: memory
// freed inside a CUDA graph capture would be handed out again while the graph still writes it.
// A shape first seen while capturing takes the gemv up to its row limit, the tiles past it.
#pragma once

#include "runtime/tensor.h"

namespace tessera::gpu {

inline constexpr int64_t kQuantizedGemvMaxRows = 64;

// out[..., N] = x[..., K] @ weight[N, K]^T (+ bias), weight quantized; arguments already checked.
void quantized_linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out);
// Whether the gemv takes `weight` through integer dot products with x quantized to 8 bits per
// block as the CPU quantizes it (kernels/cuda/gemm/quantized_dot.cuh), or through float sums of
// the dequantized weight with x as it is (the formats without integer dots, and misaligned views).
bool quantized_gemv_quantizes_activations(const Tensor& weight);
// Whether the int8 tensor-core path (quantized_mma.h) takes `weight` (Q4_K, Q6_K, Q8_0 on CUDA).
bool quantized_mma_fits(const Tensor& weight);
// The three paths, for tests and labs.
void quantized_linear_gemv(const Tensor& x, const Tensor& weight, const Tensor* bias,
                           const Tensor& out);
void quantized_linear_mma(const Tensor& x, const Tensor& weight, const Tensor* bias,
                          const Tensor& out);
void quantized_linear_tiles(const Tensor& x, const Tensor& weight, const Tensor* bias,
                            const Tensor& out);

// out[i, :] = the dequantized row ids[i] (f32) of a quantized table; ids outside
// [vocab_start, vocab_start + V) give zero rows (as the dense kernel, which never reads outside).
void quantized_embedding(const Tensor& weight, const Tensor& ids, int64_t vocab_start,
                         const Tensor& out);

}  // namespace tessera::gpu
