// The GPU kernels of fused_moe (compile/ops/custom/fused_moe.cpp), callable directly so that the
// lab and the tests can run each of its two grouped-GEMM kernels on any shape; the op's
// registered kernel calls run_fused_moe with `automatic`.
#pragma once

#include <cstdint>

#include "runtime/tensor.h"

namespace tessera::gpu {

enum class MoeKernel {
  automatic,     // skinny while the (token, expert) pairs average at most 1 per local expert
                 // (8 without tensor cores), then tensor_cores where they fit, else tiled
  skinny,        // a warp per weight row, up to 8 of an expert's pairs per tile (decode)
  tiled,         // 64 x 64 tiles of an expert's pairs and rows, f32 FMAs through shared memory
  tensor_cores,  // the same tiles on tensor cores (bf16/f16 rows of whole 16-byte chunks, CUDA)
};

// Whether MoeKernel::tensor_cores can run fused_moe on these tensors (the automatic choice takes
// it over `tiled` where it can).
bool fused_moe_fits_tensor_cores(const Tensor& x, const Tensor& gate_up, const Tensor& down);

// out [T, H] = sum over each token's top_k experts among [first_expert, first_expert + E) of
// weight * down[e] (silu(gate) * up), gate/up = gate_up[e] x; with x [T, H], router_logits [T, N],
// gate_up [E, 2I, H], down [E, H, I] (each x's dtype or a GGUF block format), as the op's CPU
// kernel computes it (quantized experts: from x as it is, where the CPU rounds it to 8 bits).
void run_fused_moe(const Tensor& x, const Tensor& router_logits, const Tensor& gate_up,
                   const Tensor& down, const Tensor& out, int64_t top_k, bool renormalize,
                   int64_t first_expert, MoeKernel kernel = MoeKernel::automatic);

}  // namespace tessera::gpu
