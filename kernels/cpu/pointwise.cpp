// CPU kernels of the pointwise ops: those of the formula table (kernels/pointwise_kernel.h), where,
// cast and copy. Inputs arrive expanded to the output's shape with any strides; map_elements
// (strided_loop.h) walks them.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/strided_loop.h"
#include "kernels/kernel_registry.h"
#include "kernels/pointwise_kernel.h"

namespace tessera::cpu {
namespace {

// The formula table's ops on the CPU: values converted to the compute type (f32 for f16/bf16),
// the formula applied, the result rounded back once.
struct CpuElementwise {
  template <typename Fn>
  static void visit_numeric(DType dtype, Fn&& fn) {
    visit_dtype(dtype, fn);
  }
  template <typename Fn>
  static void visit_float(const char* op, DType dtype, Fn&& fn) {
    visit_float_dtype(op, dtype, fn);
  }

  template <typename T, typename Functor, typename... Tensors>
  static void map(const char*, const Tensor& out, const Functor& functor,
                  const Tensors&... inputs) {
    map_elements<T>(
        out,
        [&](auto... values) {
          return static_cast<T>(functor(static_cast<ComputeType<T>>(values)...));
        },
        Input<T>{inputs}...);
  }
};

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
  // where only selects, so values move as raw bits of their width.
  visit_dtype(condition.dtype(), [&]<typename Condition>() {
    if constexpr (std::is_integral_v<Condition>) {
      visit_element_bits(a.dtype(), [&]<typename Bits>() {
        map_elements<Bits>(
            out, [](Condition c, Bits x, Bits y) { return c != 0 ? x : y; },
            Input<Condition>{condition}, Input<Bits>{a}, Input<Bits>{b});
      });
    }
  });
}

// Float to integer truncates toward zero; NaN becomes 0 and out-of-range values saturate (a plain
// static_cast would be undefined behavior there).
template <typename To, typename From>
To convert_element(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_integral_v<From>) {
    if constexpr (std::is_integral_v<To>)
      return static_cast<To>(value);
    else
      return To(static_cast<float>(value));
  } else {
    const float x = static_cast<float>(value);
    if constexpr (std::is_integral_v<To>) {
      if (x != x) return To{0};
      if (x >= static_cast<float>(std::numeric_limits<To>::max()))
        return std::numeric_limits<To>::max();
      if (x <= static_cast<float>(std::numeric_limits<To>::min()))
        return std::numeric_limits<To>::min();
      return static_cast<To>(x);
    } else {
      return To(x);
    }
  }
}

void cast_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_dtype("cast", "output", out, args.attributes.get_dtype("dtype"));
  visit_dtype(x.dtype(), [&]<typename From>() {
    visit_dtype(out.dtype(), [&]<typename To>() {
      map_elements<To>(
          out, [](From value) { return convert_element<To>(value); }, Input<From>{x});
    });
  });
}

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
[[maybe_unused]] const bool formula_kernels_registered =
    register_pointwise_formula_kernels<CpuElementwise>(kCpu);
TESSERA_REGISTER_KERNEL("where", kCpu, where_kernel);
TESSERA_REGISTER_KERNEL("cast", kCpu, cast_kernel);
TESSERA_REGISTER_KERNEL("copy", kCpu, copy_kernel);

}  // namespace
}  // namespace tessera::cpu
