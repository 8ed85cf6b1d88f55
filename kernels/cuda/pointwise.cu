// GPU kernels of the pointwise ops: those of the formula table (kernels/pointwise_kernel.h, the
// same formulas as the CPU's), where and cast. Inputs arrive expanded to the output's shape with
// any strides (0 for broadcast); launch_map (elementwise.cuh) walks them. Semantics match the CPU
// kernels (kernels/cpu/pointwise.cpp): f16/bf16 compute in f32, float -> int casts truncate toward
// zero, saturate, and send NaN to 0.
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_registry.h"
#include "kernels/pointwise_kernel.h"

namespace tessera::gpu {
namespace {

// The formula table's ops on the GPU: a storage value converted to its compute type (f32 for
// f16/bf16), the formula applied, the result rounded back once.
template <typename T, typename Functor>
struct StorageFunctor {
  Functor functor;
  template <typename... Storage>
  __device__ T operator()(Storage... values) const {
    return from_compute<T>(functor(to_compute(values)...));
  }
};

struct GpuElementwise {
  template <typename Fn>
  static void visit_numeric(DType dtype, Fn&& fn) {
    visit_device_dtype(dtype, fn);
  }
  template <typename Fn>
  static void visit_float(const char* op, DType dtype, Fn&& fn) {
    visit_device_float_dtype(op, dtype, fn);
  }

  template <typename T, typename Functor, typename... Tensors>
  static void map(const char* op, const Tensor& out, const Functor& functor,
                  const Tensors&... inputs) {
    launch_map<T>(op, out, StorageFunctor<T, Functor>{functor}, Input<T>{inputs}...);
  }
};

// where only selects, so values move as raw bits of their width.
template <typename Condition, typename Bits>
struct WhereFunctor {
  __device__ Bits operator()(Condition condition, Bits a, Bits b) const {
    return condition != 0 ? a : b;
  }
};

template <typename To, typename From>
struct CastFunctor {
  __device__ To operator()(From value) const {
    if constexpr (std::is_same_v<To, From>) {
      return value;
    } else if constexpr (std::is_integral_v<From>) {
      if constexpr (std::is_integral_v<To>)
        return static_cast<To>(value);
      else
        return from_compute<To>(static_cast<float>(value));
    } else {
      const float x = to_compute(value);
      if constexpr (std::is_integral_v<To>) {
        // Explicit, because an out-of-range float -> int conversion is undefined in C++.
        if (x != x) return To{0};
        if (x >= static_cast<float>(std::numeric_limits<To>::max()))
          return std::numeric_limits<To>::max();
        if (x <= static_cast<float>(std::numeric_limits<To>::min()))
          return std::numeric_limits<To>::min();
        return static_cast<To>(x);
      } else {
        return from_compute<To>(x);
      }
    }
  }
};

// ---- Kernel entry points.

void where_kernel(const KernelArgs& args) {
  const Tensor& condition = args.inputs[0];
  const Tensor& a = args.inputs[1];
  const Tensor& b = args.inputs[2];
  const Tensor& out = args.outputs[0];
  TESSERA_REQUIRE(condition.dtype() == DType::i32 || condition.dtype() == DType::i64,
                  "where: condition has dtype {}; use i32 or i64 (nonzero is true)",
                  dtype_name(condition.dtype()));
  require_dtype("where", "input b", b, a.dtype());
  require_dtype("where", "output", out, a.dtype());
  visit_device_dtype(condition.dtype(), [&]<typename Condition>() {
    if constexpr (std::is_integral_v<Condition>) {
      visit_element_bits(a.dtype(), [&]<typename Bits>() {
        launch_map<Bits>("where", out, WhereFunctor<Condition, Bits>{}, Input<Condition>{condition},
                         Input<Bits>{a}, Input<Bits>{b});
      });
    }
  });
}

void cast_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_dtype("cast", "output", out, args.attributes.get_dtype("dtype"));
  visit_device_dtype(x.dtype(), [&]<typename From>() {
    visit_device_dtype(out.dtype(), [&]<typename To>() {
      launch_map<To>("cast", out, CastFunctor<To, From>{}, Input<From>{x});
    });
  });
}

[[maybe_unused]] const bool formula_kernels_registered =
    register_pointwise_formula_kernels<GpuElementwise>(kGpuDeviceType);
TESSERA_REGISTER_KERNEL("where", kGpuDeviceType, where_kernel);
TESSERA_REGISTER_KERNEL("cast", kGpuDeviceType, cast_kernel);

}  // namespace
}  // namespace tessera::gpu
