// GPU kernels of the custom ops silu_and_mul and gelu_and_mul (compile/ops/custom/
// activation_and_mul.cpp), with the semantics of the CPU kernels (kernels/cpu/
// activation_and_mul.cpp): out[..., j] = act(x[..., j]) * x[..., d + j], f32 compute, rounded once.
//
// Grid-stride over groups of E output elements of one row: each group reads E gate and E up
// elements and writes E outputs, as 16-byte packs when d is a multiple of the pack and the pointers
// are aligned, else one element at a time.
#include <cstdint>
#include <string>

#include "kernels/check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/kernel_registry.h"

namespace tessera::gpu {
namespace {

constexpr int kThreads = 256;

// The same expressions as the GPU silu and gelu kernels (kernels/cuda/pointwise.cu).
struct Silu {
  static constexpr const char* kName = "silu_and_mul";
  explicit Silu(const Attributes&) {}
  __device__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};

struct Gelu {
  static constexpr const char* kName = "gelu_and_mul";
  bool tanh_form = false;
  explicit Gelu(const Attributes& attributes) {
    const std::string approximate = attributes.get_string("approximate", "none");
    TESSERA_REQUIRE(approximate == "none" || approximate == "tanh",
                    "gelu_and_mul: approximate='{}' is not valid; use 'none' or 'tanh'",
                    approximate);
    tanh_form = approximate == "tanh";
  }
  __device__ float operator()(float x) const {
    if (tanh_form) {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    }
    constexpr float kInverseSqrt2 = 0.7071067811865476f;
    return 0.5f * x * (1.0f + erff(x * kInverseSqrt2));
  }
};

// x [rows, 2 * half] -> out [rows, half]; half is a multiple of E.
template <typename T, int E, typename Activation>
__global__ void __launch_bounds__(kThreads)
    activation_and_mul_kernel(int64_t rows, int64_t half, Activation activation, const T* x,
                              T* out) {
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
void launch_activation_and_mul(int64_t rows, int64_t half, const Activation& activation,
                               const Tensor& x, const Tensor& out, gpuStream_t stream) {
  const unsigned int blocks = grid_size(rows * (half / E), kThreads);
  activation_and_mul_kernel<T, E, Activation><<<blocks, kThreads, 0, stream>>>(
      rows, half, activation, static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()));
  GPU_CHECK_LAUNCH(Activation::kName);
}

template <typename Activation>
void activation_and_mul(const KernelArgs& args) {
  const char* op = Activation::kName;
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
  const Activation activation(args.attributes);
  if (out.numel() == 0) return;
  const int64_t rows = out.numel() / half;
  LaunchScope scope(x.device());
  visit_device_float_dtype(op, x.dtype(), [&]<typename T>() {
    constexpr int V = kPackElements<T>;
    if (half % V == 0 && pack_aligned<T, V>(x.data_ptr()) && pack_aligned<T, V>(out.data_ptr())) {
      launch_activation_and_mul<T, V>(rows, half, activation, x, out, scope.stream());
    } else {
      launch_activation_and_mul<T, 1>(rows, half, activation, x, out, scope.stream());
    }
  });
}

TESSERA_REGISTER_KERNEL("silu_and_mul", kGpuDeviceType, activation_and_mul<Silu>);
TESSERA_REGISTER_KERNEL("gelu_and_mul", kGpuDeviceType, activation_and_mul<Gelu>);

}  // namespace
}  // namespace tessera::gpu
