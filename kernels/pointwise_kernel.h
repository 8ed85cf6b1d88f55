// The kernels of the pointwise ops (the formula table's, kernels/pointwise_table.h, where and
// cast), written once for every backend. `Elementwise` is the backend's part: its dtype visitors,
// its storage <-> compute conversion, and its elementwise map over inputs expanded to the output's
// shape with any strides (CpuElementwise in kernels/cpu/pointwise.cpp, GpuElementwise in
// kernels/cuda/pointwise/pointwise.cu).
#pragma once

#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/kernel_checks.h"
#include "kernels/pointwise_table.h"
#include "runtime/check.h"
#include "runtime/dtype.h"
#include "runtime/kernel_registry.h"

#ifdef __CUDACC__
// The storage conversions are device functions on the GPU; the functors below call them only
// from device code.
#define TESSERA_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define TESSERA_EXEC_CHECK_DISABLE
#endif

namespace tessera {

template <typename T, size_t>
using Repeat = T;

// A functor over compute values applied to storage values (T): `Compute` is the backend's
// conversion (f16/bf16 to f32 and back, integers as themselves).
template <typename T, typename Functor, typename Compute>
struct StorageFunctor {
  Functor functor;
  TESSERA_EXEC_CHECK_DISABLE
  template <typename... Storage>
  TESSERA_HOST_DEVICE T operator()(Storage... values) const {
    return Compute::template from_compute<T>(functor(Compute::to_compute(values)...));
  }
};

// where only selects, so values move as raw bits of their width.
template <typename Condition, typename Bits>
struct WhereFunctor {
  TESSERA_HOST_DEVICE Bits operator()(Condition condition, Bits a, Bits b) const {
    return condition != 0 ? a : b;
  }
};

// Float to integer truncates toward zero; NaN becomes 0 and out-of-range values saturate (a plain
// conversion would be undefined behavior there).
template <typename To, typename From, typename Compute>
struct CastFunctor {
  TESSERA_EXEC_CHECK_DISABLE
  TESSERA_HOST_DEVICE To operator()(From value) const {
    if constexpr (std::is_same_v<To, From>) {
      return value;
    } else if constexpr (std::is_integral_v<From>) {
      if constexpr (std::is_integral_v<To>)
        return static_cast<To>(value);
      else
        return Compute::template from_compute<To>(static_cast<float>(value));
    } else {
      const float x = Compute::to_compute(value);
      if constexpr (std::is_integral_v<To>) {
        if (x != x) return To{0};
        if (x >= static_cast<float>(std::numeric_limits<To>::max()))
          return std::numeric_limits<To>::max();
        if (x <= static_cast<float>(std::numeric_limits<To>::min()))
          return std::numeric_limits<To>::min();
        return static_cast<To>(x);
      } else {
        return Compute::template from_compute<To>(x);
      }
    }
  }
};

// out = Formula(inputs..., parameters) elementwise, computed in f32 (or the integer type).
template <typename Elementwise, typename Formula>
void pointwise_formula_kernel(const KernelArgs& args) {
  const Tensor& first = args.inputs[0];
  const Tensor& out = args.outputs[0];
  for (size_t i = 1; i < Formula::kInputs; ++i) {
    const std::string what = std::string("input ") + Formula::kInputNames[i];
    require_dtype(Formula::kName, what.c_str(), args.inputs[i], first.dtype());
  }
  require_dtype(Formula::kName, "output", out, first.dtype());
  using Functor = PointwiseFunctor<Formula>;
  const Functor functor(args.attributes);
  auto run = [&]<typename T>() {
    [&]<size_t... I>(std::index_sequence<I...>) {
      using Storage = StorageFunctor<T, Functor, typename Elementwise::Compute>;
      Elementwise::template map<T, Repeat<T, I>...>(Formula::kName, out, Storage{functor},
                                                    args.inputs[I]...);
    }
    (std::make_index_sequence<Formula::kInputs>{});
  };
  if constexpr (Formula::kIntegers) {
    Elementwise::visit_numeric(first.dtype(), run);
  } else {
    Elementwise::visit_float(Formula::kName, first.dtype(), run);
  }
}

template <typename Elementwise>
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
  Elementwise::visit_numeric(condition.dtype(), [&]<typename Condition>() {
    if constexpr (std::is_integral_v<Condition>) {
      Elementwise::visit_bits(a.dtype(), [&]<typename Bits>() {
        Elementwise::template map<Bits, Condition, Bits, Bits>(
            "where", out, WhereFunctor<Condition, Bits>{}, condition, a, b);
      });
    }
  });
}

template <typename Elementwise>
void cast_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_dtype("cast", "output", out, args.attributes.get_dtype("dtype"));
  Elementwise::visit_numeric(x.dtype(), [&]<typename From>() {
    Elementwise::visit_numeric(out.dtype(), [&]<typename To>() {
      using Cast = CastFunctor<To, From, typename Elementwise::Compute>;
      Elementwise::template map<To, From>("cast", out, Cast{}, x);
    });
  });
}

// Registers the kernels of the table's ops, where and cast for `device`.
template <typename Elementwise>
bool register_pointwise_kernels(DeviceType device) {
#define TESSERA_REGISTER_FORMULA_KERNEL(name, ...) \
  register_kernel(#name, device, pointwise_formula_kernel<Elementwise, pointwise::name>);
  TESSERA_POINTWISE_OPS(TESSERA_REGISTER_FORMULA_KERNEL)
#undef TESSERA_REGISTER_FORMULA_KERNEL
  register_kernel("where", device, where_kernel<Elementwise>);
  register_kernel("cast", device, cast_kernel<Elementwise>);
  return true;
}

}  // namespace tessera
