// The kernels of silu_and_mul_linear and gelu_and_mul_linear (compile/ops/
// activation_and_mul_linear.cpp) that every device shares: the argument checks, and the path that
// runs the activation and the linear one after the other with the device's own kernels (the CPU's
// only path; a GPU's when no skinny kernel takes the product, kernels/cuda/
// activation_and_mul_linear.cpp).
#pragma once

#include "runtime/kernel_registry.h"

namespace tessera {

// The activation op of a fused op: "silu_and_mul" for "silu_and_mul_linear".
std::string activation_of(const char* fused_op);
// Checks x [..., 2k], weight [n, k], bias [n], out [..., n] and activated [..., k]: contiguous,
// one float dtype.
void check_activation_and_mul_linear(const char* op, const KernelArgs& args);
// activated = act(x[..., :k]) * x[..., k:], then out = linear(activated, weight, bias).
void run_activation_and_mul_then_linear(const char* op, DeviceType device, const KernelArgs& args);

}  // namespace tessera
