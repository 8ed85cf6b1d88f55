// The kernels of the formula table's pointwise ops (kernels/pointwise_table.h), written once for
// every backend. `Elementwise` is the backend's part: its dtype visitor and its elementwise map
// over inputs expanded to the output's shape with any strides (CpuElementwise in
// kernels/cpu/pointwise.cpp, GpuElementwise in kernels/cuda/pointwise.cu).
#pragma once

#include <string>
#include <utility>

#include "kernels/kernel_checks.h"
#include "kernels/kernel_registry.h"
#include "kernels/pointwise_table.h"

namespace tessera {

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
  const PointwiseFunctor<Formula> functor(args.attributes);
  auto run = [&]<typename T>() {
    [&]<size_t... I>(std::index_sequence<I...>) {
      Elementwise::template map<T>(Formula::kName, out, functor, args.inputs[I]...);
    }
    (std::make_index_sequence<Formula::kInputs>{});
  };
  if constexpr (Formula::kIntegers) {
    Elementwise::visit_numeric(first.dtype(), run);
  } else {
    Elementwise::visit_float(Formula::kName, first.dtype(), run);
  }
}

// Registers the kernel of every op of the table for `device`.
template <typename Elementwise>
bool register_pointwise_formula_kernels(DeviceType device) {
#define TESSERA_REGISTER_FORMULA_KERNEL(name, ...) \
  register_kernel(#name, device, pointwise_formula_kernel<Elementwise, pointwise::name>);
  TESSERA_POINTWISE_OPS(TESSERA_REGISTER_FORMULA_KERNEL)
#undef TESSERA_REGISTER_FORMULA_KERNEL
  return true;
}

}  // namespace tessera
