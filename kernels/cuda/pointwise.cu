// GPU kernels of the pointwise ops, written once for every backend in kernels/pointwise_kernel.h
// (so their semantics are the CPU's). Inputs arrive expanded to the output's shape with any
// strides (0 for broadcast); launch_map (elementwise.cuh) walks them.
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/kernel_checks.h"
#include "kernels/pointwise_kernel.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

// The GPU's part of the pointwise kernels (kernels/pointwise_kernel.h).
struct GpuElementwise {
  // f16/bf16 compute in f32, integers in their own type.
  struct Compute {
    template <typename T>
    __device__ static ComputeType<T> to_compute(T value) {
      return gpu::to_compute(value);
    }
    template <typename T>
    __device__ static T from_compute(ComputeType<T> value) {
      return gpu::from_compute<T>(value);
    }
  };
  template <typename Fn>
  static void visit_numeric(DType dtype, Fn&& fn) {
    visit_device_dtype(dtype, fn);
  }
  template <typename Fn>
  static void visit_float(const char* op, DType dtype, Fn&& fn) {
    visit_device_float_dtype(op, dtype, fn);
  }
  template <typename Fn>
  static void visit_bits(DType dtype, Fn&& fn) {
    visit_element_bits(dtype, fn);
  }
  // out (Out) = fn(inputs (In)...) elementwise.
  template <typename Out, typename... In, typename Fn, typename... Tensors>
  static void map(const char* op, const Tensor& out, const Fn& fn, const Tensors&... inputs) {
    launch_map<Out>(op, out, fn, Input<In>{inputs}...);
  }
};

[[maybe_unused]] const bool pointwise_kernels_registered =
    register_pointwise_kernels<GpuElementwise>(kGpuDeviceType);

}  // namespace
}  // namespace tessera::gpu
