// CPU kernels of the pointwise ops (written once for every backend in kernels/pointwise_kernel.h)
// and copy. Inputs arrive expanded to the output's shape with any strides; map_elements
// (strided_loop.h) walks them.
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/strided_loop.h"
#include "kernels/pointwise_kernel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

// The CPU's part of the pointwise kernels (kernels/pointwise_kernel.h).
struct CpuElementwise {
  // f16/bf16 compute in f32, integers in their own type.
  struct Compute {
    template <typename T>
    static ComputeType<T> to_compute(T value) {
      return static_cast<ComputeType<T>>(value);
    }
    template <typename T>
    static T from_compute(ComputeType<T> value) {
      return static_cast<T>(value);
    }
  };
  template <typename Fn>
  static void visit_numeric(DType dtype, Fn&& fn) {
    visit_dtype(dtype, fn);
  }
  template <typename Fn>
  static void visit_float(const char* op, DType dtype, Fn&& fn) {
    visit_float_dtype(op, dtype, fn);
  }
  template <typename Fn>
  static void visit_bits(DType dtype, Fn&& fn) {
    visit_element_bits(dtype, fn);
  }
  // out (Out) = fn(inputs (In)...) elementwise.
  template <typename Out, typename... In, typename Fn, typename... Tensors>
  static void map(const char*, const Tensor& out, const Fn& fn, const Tensors&... inputs) {
    map_elements<Out>(out, fn, Input<In>{inputs}...);
  }
};

// Both sides may be strided (Tensor::copy_from writes into views).
void copy_kernel(const KernelArgs& args) {
  const Tensor& source = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_dtype("copy", "destination", out, source.dtype());
  require_sizes("copy", "destination", out, source.sizes());
  visit_element_bits(source.dtype(), [&]<typename Bits>() {
    map_elements<Bits>(
        out, [](Bits value) { return value; }, Input<Bits>{source});
  });
}

constexpr DeviceType kCpu = DeviceType::cpu;
[[maybe_unused]] const bool pointwise_kernels_registered =
    register_pointwise_kernels<CpuElementwise>(kCpu);
TESSERA_REGISTER_KERNEL("copy", kCpu, copy_kernel);

}  // namespace
}  // namespace tessera::cpu
