// GPU kernels of the custom ops silu_and_mul and gelu_and_mul (compile/ops/custom/
// activation_and_mul.cpp), with the semantics of the CPU kernels (kernels/cpu/
// activation_and_mul.cpp): out[..., j] = act(x[..., j]) * x[..., d + j], f32 compute, rounded once.
//
// Launched programmatically (runtime/backend/programmatic_launch.h). Grid-stride over groups of E
// output elements of one row: each group reads E gate and E up elements and writes E outputs, as
// 16-byte packs when d is a multiple of the pack and the pointers are aligned, else one element
// at a time.
#include <cstdint>
#include <string>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/pointwise_table.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

constexpr int kThreads = 256;

// x [rows, 2 * half] -> out [rows, half]; half is a multiple of E.
template <typename T, int E, typename Activation>
__global__ void __launch_bounds__(kThreads)
    activation_and_mul_kernel(int64_t rows, int64_t half, Activation activation, const T* x,
                              T* out) {
  wait_for_prior_grids();
  allow_next_grid();
  const int64_t groups_per_row = half / E;
  const int64_t groups = rows * groups_per_row;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t group = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; group < groups;
       group += step) {
    const int64_t row = group / groups_per_row;
    const int64_t column = (group - row * groups_per_row) * E;
    const T* gate_start = x + row * 2 * half + column;
    const Pack<T, E> gate = load_pack<E>(gate_start);
    const Pack<T, E> up = load_pack<E>(gate_start + half);
    Pack<T, E> result;
#pragma unroll
    for (int j = 0; j < E; ++j) {
      result.values[j] =
          from_compute<T>(activation(to_compute(gate.values[j])) * to_compute(up.values[j]));
    }
    store_pack<E>(out + row * half + column, result);
  }
}

template <typename T, int E, typename Activation>
void launch_activation_and_mul(const char* op, int64_t rows, int64_t half,
                               const Activation& activation, const Tensor& x, const Tensor& out,
                               gpuStream_t stream) {
  const unsigned int blocks = grid_size(rows * (half / E), kThreads);
  launch_programmatic(activation_and_mul_kernel<T, E, Activation>, dim3(blocks), dim3(kThreads), 0,
                      stream, x.device().index, rows, half, activation,
                      static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()));
  GPU_CHECK_LAUNCH(op);
}

// Activation: the formula of the pointwise op (kernels/pointwise_table.h) applied to the gate.
template <typename Activation>
void activation_and_mul(const KernelArgs& args) {
  const std::string name = std::string(Activation::kName) + "_and_mul";
  const char* op = name.c_str();
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  for (const Tensor* tensor : {&x, &out}) {
    TESSERA_REQUIRE(tensor->numel() == 0 || tensor->is_contiguous(), "{}: {} must be contiguous",
                    op, tensor->str());
  }
  TESSERA_REQUIRE(x.dim() >= 1 && x.sizes().back() % 2 == 0,
                  "{}: x {} needs an even last size (gate and up halves)", op, x.str());
  const int64_t half = x.sizes().back() / 2;
  Shape out_sizes = x.sizes();
  out_sizes.back() = half;
  TESSERA_REQUIRE(
      out.sizes() == out_sizes && out.dtype() == x.dtype() && out.device() == x.device(),
      "{}: output {} must be x {} with the last size halved", op, out.str(), x.str());
  const PointwiseFunctor<Activation> activation(args.attributes, op);
  if (out.numel() == 0) return;
  const int64_t rows = out.numel() / half;
  LaunchScope scope(x.device());
  visit_device_float_dtype(op, x.dtype(), [&]<typename T>() {
    constexpr int V = kPackElements<T>;
    if (half % V == 0 && pack_aligned<T, V>(x.data_ptr()) && pack_aligned<T, V>(out.data_ptr())) {
      launch_activation_and_mul<T, V>(op, rows, half, activation, x, out, scope.stream());
    } else {
      launch_activation_and_mul<T, 1>(op, rows, half, activation, x, out, scope.stream());
    }
  });
}

TESSERA_REGISTER_KERNEL("silu_and_mul", kGpuDeviceType, activation_and_mul<pointwise::silu>);
TESSERA_REGISTER_KERNEL("gelu_and_mul", kGpuDeviceType, activation_and_mul<pointwise::gelu>);

}  // namespace
}  // namespace tessera::gpu
