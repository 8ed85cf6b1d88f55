// Skinny GEMMs for decode: out[m, n] = x[m, k] @ weight[n, k]^T (+ bias[n]) with few rows m
// (1..256) against a large weight, where the time is the weight's one pass through memory and a
// library GEMM tiled for large m leaves most of the bandwidth unused. Two kernel families
// (skinny_gemm.cu):
//   simt_r2, simt_r4 (m <= 8), simt_r8, simt_r16 (m <= 4) (f32/bf16/f16): each warp streams 2 to
//     16 weight rows in 16-byte loads, several in flight, against the m rows of x (read through
//     L1), f32 FMAs; more rows per warp means fewer blocks, each reading (or computing) x;
//   mma_t1..mma_t8 (bf16/f16, CUDA only): each warp streams 16 weight rows as the A operand of
//     mma.sync m16n8k16 against 8 to 64 rows of x as B (1, 2, 4 or 8 tiles of 8 rows).
// Both can compute x while reading it from the gate and up halves of a gated row (the gated MLP's
// down projection, activation_and_mul_linear): x = act(gate) * up, rounded once to the dtype,
// also stored in `activated` by the blocks of the first weight tile.
// Both split k across the warps of a block when the grid would be too small to keep enough loads
// in flight (small n), summing the partial sums in shared memory: one launch, no workspace. f32
// accumulation, the output rounded once after the bias is added, as cuBLASLt's epilogue does.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cuda/gemm/l2_prefetch.h"
#include "kernels/cuda/gpu_vendor.h"
#include "runtime/attributes.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace tessera::gpu {

// Rows of x the skinny kernels take at most.
inline constexpr int64_t kSkinnyMaxRows = 256;

// How x is read: as it is, or as act(gate) * up of a gated row (pointwise::silu, pointwise::gelu).
enum class SkinnyActivation { none, silu, gelu };

struct SkinnyProblem {
  int64_t m = 0, n = 0, k = 0;
  // [m, k], contiguous; with an activation, the gated rows [m, 2k] (gate | up).
  const void* x = nullptr;
  const void* weight = nullptr;  // [n, k], contiguous
  const void* bias = nullptr;    // [n] or nullptr; the dtype of x
  void* out = nullptr;           // [m, n], contiguous
  DType dtype = DType::f32;
  int device = 0;
  SkinnyActivation activation = SkinnyActivation::none;
  void* activated = nullptr;  // [m, k], contiguous: the computed x (with an activation)
  Attributes attributes;      // the activation's (gelu's approximate)
  L2Prefetch prefetch;        // the next GEMM's weight: the last blocks ask for it as they end
};

struct SkinnyVariant {
  const char* name;
  bool (*fits)(const SkinnyProblem& problem);
  void (*launch)(const SkinnyProblem& problem, gpuStream_t stream);
};

// Every variant, in the order labs print them.
std::span<const SkinnyVariant> skinny_variants();
// The variant named `name`, or nullptr.
const SkinnyVariant* find_skinny_variant(const char* name);

// The problem of out = linear(x, weight, bias) on contiguous tensors, x [..., k].
SkinnyProblem linear_problem(const Tensor& x, const Tensor& weight, const Tensor* bias,
                             const Tensor& out);
// The same product with x computed from `gated` [..., 2k] by `activation` (its attributes in
// `attributes`) and stored in `activated` [..., k].
SkinnyProblem gated_linear_problem(const Tensor& gated, const Tensor& weight, const Tensor* bias,
                                   const Tensor& out, const Tensor& activated,
                                   SkinnyActivation activation, const Attributes& attributes);

}  // namespace tessera::gpu
