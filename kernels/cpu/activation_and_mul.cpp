// CPU kernels of the custom ops silu_and_mul and gelu_and_mul (compile/ops/custom/
// activation_and_mul.cpp): out[..., j] = act(x[..., j]) * x[..., d + j] for x [..., 2d], the gated
// MLP's gate and up halves. Computed in f32 and rounded once; rows are spread over threads.
#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cpu/kernel_util.h"
#include "kernels/pointwise_table.h"
#include "runtime/cpu/parallel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

// Activation: the formula of the pointwise op (kernels/pointwise_table.h) applied to the gate.
template <typename Activation>
void activation_and_mul_kernel(const KernelArgs& args) {
  const std::string name = std::string(Activation::kName) + "_and_mul";
  const char* op = name.c_str();
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_contiguous(op, "x", x);
  require_contiguous(op, "output", out);
  TESSERA_REQUIRE(x.dim() >= 1 && x.sizes().back() % 2 == 0,
                  "{}: x {} needs an even last size (gate and up halves)", op, x.str());
  const int64_t half = x.sizes().back() / 2;
  Shape out_sizes = x.sizes();
  out_sizes.back() = half;
  require_dtype(op, "output", out, x.dtype());
  require_sizes(op, "output", out, out_sizes);
  if (half == 0) return;
  const int64_t rows = out.numel() / half;
  const PointwiseFunctor<Activation> activation(args.attributes, op);
  visit_float_dtype(op, x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    T* result = out.data<T>();
    const int64_t min_rows = std::max<int64_t>(1, kParallelGrain / half);
    parallel_for(rows, min_rows, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const T* gate = in + row * 2 * half;
        const T* up = gate + half;
        T* out_row = result + row * half;
        for (int64_t j = 0; j < half; ++j)
          out_row[j] = T(activation(static_cast<float>(gate[j])) * static_cast<float>(up[j]));
      }
    });
  });
}

TESSERA_REGISTER_KERNEL("silu_and_mul", DeviceType::cpu,
                        activation_and_mul_kernel<pointwise::silu>);
TESSERA_REGISTER_KERNEL("gelu_and_mul", DeviceType::cpu,
                        activation_and_mul_kernel<pointwise::gelu>);

}  // namespace
}  // namespace tessera::cpu
