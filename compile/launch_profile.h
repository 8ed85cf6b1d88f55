// How the step profiler (runtime/profiler/profiler.h) sees an op's launch: the kernel class it
// counts under, and the bytes, FLOPs and shape of one launch.
#pragma once

#include <span>

#include "compile/ir/op_registry.h"
#include "runtime/profiler/profiler.h"

namespace tessera {

// GEMMs (matmul, linear), attention (the splitting op), fused (custom ops' own kernels), sampling
// (argmax, sample*), copies (copy, contiguous), pointwise (the rest: elementwise, reductions,
// gathers).
KernelClass kernel_class_of(const OpDef& op);

// Bytes: every input (read_bytes for gathers) and output once; attention adds the K/V cache rows
// its sequences read (from the forward context's host metadata, when it has them). FLOPs: 2 M N K
// per GEMM; 4 per query head, key and head element for attention (scores and the weighted sum).
LaunchDetail launch_detail(const OpDef& op, std::span<const Tensor> inputs,
                           std::span<const Tensor> outputs, const Attributes& attributes);

// The bytes of `tensors` (their elements, not their storage).
double tensor_bytes(std::span<const Tensor> tensors);
// The bytes a launch of `rows` rows reads of `input`: all of it, except from a table with more
// rows than the launch (an embedding, a RoPE cache), which is gathered from, one row per row.
double read_bytes(const Tensor& input, int64_t rows);

}  // namespace tessera
