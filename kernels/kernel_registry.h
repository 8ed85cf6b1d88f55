// Kernels by (op name, device type). Each kernel file registers its kernels with
// TESSERA_REGISTER_KERNEL; compile/ops looks them up when it dispatches an op. Outputs arrive
// allocated (contiguous) with the sizes and dtypes the op's meta function computed.
#pragma once

#include <span>
#include <string>

#include "runtime/attributes.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace tessera {

struct KernelArgs {
  std::span<const Tensor> inputs;
  const Attributes& attributes;
  std::span<Tensor> outputs;
  // A weight the next GEMM reads, which a GEMM kernel may start pulling into the device's cache
  // as it ends (compile/passes/weight_prefetch.cpp); nullptr: none. Only a hint.
  const Tensor* prefetch = nullptr;
  // The kernel before this one is a splitting op's (the attention's), which spread over the SMs
  // (compile/passes/follows_splitting.cpp); a GEMM times its paths without the overlap a
  // programmatic launch has beside a small kernel. Only a hint.
  bool follows_splitting_op = false;
};

using KernelFn = void (*)(const KernelArgs& args);

bool register_kernel(const std::string& op, DeviceType device, KernelFn kernel);
// nullptr when no kernel is registered for that op and device.
KernelFn find_kernel(const std::string& op, DeviceType device);
// Runs the registered kernel; throws naming the op and the device when there is none.
void run_kernel(const std::string& op, DeviceType device, const KernelArgs& args);

}  // namespace tessera

#define TESSERA_KERNEL_CONCAT_INNER(a, b) a##b
#define TESSERA_KERNEL_CONCAT(a, b) TESSERA_KERNEL_CONCAT_INNER(a, b)
#define TESSERA_REGISTER_KERNEL(op, device, fn)                                               \
  [[maybe_unused]] static const bool TESSERA_KERNEL_CONCAT(kernel_registered_, __COUNTER__) = \
      ::tessera::register_kernel(op, device, fn)
