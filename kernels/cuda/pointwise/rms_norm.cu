// GPU kernels of the custom ops rms_norm and fused_add_rms_norm (compile/ops/custom/rms_norm.cpp),
// with the semantics of the CPU kernels (kernels/cpu/rms_norm.cpp): f32 compute, output rounded
// once; fused_add_rms_norm writes residual_out = x + residual rounded to the dtype and normalizes
// the f32 sum.
//
// One block per row. Each thread loads its share of the row in 16-byte packs when the row allows
// (the hidden size a multiple of the pack and the pointers aligned), keeps up to kCachedPacks packs
// in registers as f32, and accumulates the squares; a warp-shuffle + shared-memory block reduction
// gives the row's sum. The second pass scales the values held in registers, so x (and residual)
// are read once and every output written once: fused_add_rms_norm writes residual_out during the
// first pass and out during the second. Rows longer than the block's register cache re-read the
// packs past it (recomputing the same f32 sum from x and residual, from L2 in practice).
#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gpu_runtime.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

// Packs of one row that each thread keeps in registers between the two passes.
constexpr int kCachedPacks = 4;

// Loads pack `pack` of the row as f32: x, or x + residual for the fused op. The fused op also
// stores the sum, rounded, to residual_out.
template <bool kFused, int E, typename T>
__device__ __forceinline__ void load_row_pack(int64_t pack, const T* x, const T* residual,
                                              T* residual_out, bool store_residual,
                                              float (&values)[E]) {
  const Pack<T, E> x_pack = load_pack<E>(x + pack * E);
  if constexpr (kFused) {
    const Pack<T, E> residual_pack = load_pack<E>(residual + pack * E);
    Pack<T, E> sum_pack;
#pragma unroll
    for (int j = 0; j < E; ++j) {
      values[j] = to_compute(x_pack.values[j]) + to_compute(residual_pack.values[j]);
      sum_pack.values[j] = from_compute<T>(values[j]);
    }
    if (store_residual) store_pack<E>(residual_out + pack * E, sum_pack);
  } else {
#pragma unroll
    for (int j = 0; j < E; ++j) values[j] = to_compute(x_pack.values[j]);
  }
}

template <int E, typename T>
__device__ __forceinline__ void store_normalized(int64_t pack, const float (&values)[E],
                                                 float scale, const T* weight, T* out) {
  const Pack<T, E> weight_pack = load_pack<E>(weight + pack * E);
  Pack<T, E> result;
#pragma unroll
  for (int j = 0; j < E; ++j)
    result.values[j] = from_compute<T>(values[j] * scale * to_compute(weight_pack.values[j]));
  store_pack<E>(out + pack * E, result);
}

// residual and residual_out are only read/written when kFused. Outputs must not alias inputs
// (the dispatcher allocates them): rows past the register cache re-read x and residual.
template <typename T, int E, int kThreads, bool kFused>
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(int64_t hidden, float eps, const T* x, const T* residual, const T* weight,
                    T* out, T* residual_out) {
  __shared__ float scratch[kThreads / GPU_WARP_SIZE];
  const int64_t row_start = static_cast<int64_t>(blockIdx.x) * hidden;
  x += row_start;
  out += row_start;
  if constexpr (kFused) {
    residual += row_start;
    residual_out += row_start;
  }
  const int64_t packs = hidden / E;

  float cached[kCachedPacks][E];
  float sum_of_squares = 0.0f;
#pragma unroll
  for (int c = 0; c < kCachedPacks; ++c) {
    const int64_t pack = static_cast<int64_t>(c) * kThreads + threadIdx.x;
    if (pack < packs) {
      load_row_pack<kFused>(pack, x, residual, residual_out, true, cached[c]);
#pragma unroll
      for (int j = 0; j < E; ++j) sum_of_squares += cached[c][j] * cached[c][j];
    }
  }
  for (int64_t pack = static_cast<int64_t>(kCachedPacks) * kThreads + threadIdx.x; pack < packs;
       pack += kThreads) {
    float values[E];
    load_row_pack<kFused>(pack, x, residual, residual_out, true, values);
#pragma unroll
    for (int j = 0; j < E; ++j) sum_of_squares += values[j] * values[j];
  }

  const float total = block_reduce<FloatSum, kThreads>(sum_of_squares, scratch);
  // 1 / sqrtf, not rsqrtf (an approximation), to stay close to the CPU kernel.
  const float scale = 1.0f / sqrtf(total / static_cast<float>(hidden) + eps);

#pragma unroll
  for (int c = 0; c < kCachedPacks; ++c) {
    const int64_t pack = static_cast<int64_t>(c) * kThreads + threadIdx.x;
    if (pack < packs) store_normalized(pack, cached[c], scale, weight, out);
  }
  for (int64_t pack = static_cast<int64_t>(kCachedPacks) * kThreads + threadIdx.x; pack < packs;
       pack += kThreads) {
    float values[E];
    load_row_pack<kFused>(pack, x, residual, residual_out, false, values);
    store_normalized(pack, values, scale, weight, out);
  }
}

struct NormLaunch {
  const Tensor* x;
  const Tensor* residual;  // null for rms_norm
  const Tensor* weight;
  const Tensor* out;
  const Tensor* residual_out;  // null for rms_norm
  int64_t rows;
  int64_t hidden;
  float eps;
};

// The fewest threads (of 64, 256, 1024) whose register caches hold the row; with few rows (decode)
// most SMs would idle, so each thread takes fewer packs and a row spreads over more threads.
int threads_for(int64_t packs, int64_t rows) {
  const int64_t packs_per_thread = rows < 256 ? 2 : kCachedPacks;
  for (int threads : {64, 256}) {
    if (packs <= threads * packs_per_thread) return threads;
  }
  return 1024;
}

template <typename T, int E, bool kFused>
void launch_with_pack(const NormLaunch& launch, gpuStream_t stream) {
  const auto* x = static_cast<const T*>(launch.x->data_ptr());
  const auto* residual = kFused ? static_cast<const T*>(launch.residual->data_ptr()) : nullptr;
  const auto* weight = static_cast<const T*>(launch.weight->data_ptr());
  auto* out = static_cast<T*>(launch.out->data_ptr());
  auto* residual_out = kFused ? static_cast<T*>(launch.residual_out->data_ptr()) : nullptr;
  const auto blocks = static_cast<unsigned int>(launch.rows);
  const int threads = threads_for(launch.hidden / E, launch.rows);
  const char* name = kFused ? "fused_add_rms_norm" : "rms_norm";
  switch (threads) {
    case 64:
      rms_norm_kernel<T, E, 64, kFused><<<blocks, 64, 0, stream>>>(
          launch.hidden, launch.eps, x, residual, weight, out, residual_out);
      break;
    case 256:
      rms_norm_kernel<T, E, 256, kFused><<<blocks, 256, 0, stream>>>(
          launch.hidden, launch.eps, x, residual, weight, out, residual_out);
      break;
    default:
      rms_norm_kernel<T, E, 1024, kFused><<<blocks, 1024, 0, stream>>>(
          launch.hidden, launch.eps, x, residual, weight, out, residual_out);
      break;
  }
  GPU_CHECK_LAUNCH(name);
}

template <typename T, bool kFused>
void launch_norm(const NormLaunch& launch, gpuStream_t stream) {
  constexpr int V = kPackElements<T>;
  bool vectorized = launch.hidden % V == 0;
  for (const Tensor* tensor :
       {launch.x, launch.residual, launch.weight, launch.out, launch.residual_out}) {
    if (tensor != nullptr) vectorized = vectorized && pack_aligned<T, V>(tensor->data_ptr());
  }
  if (vectorized) {
    launch_with_pack<T, V, kFused>(launch, stream);
  } else {
    launch_with_pack<T, 1, kFused>(launch, stream);
  }
}

void require_same(const char* op, const char* what, const Tensor& tensor, const Tensor& x,
                  bool same_sizes) {
  TESSERA_REQUIRE(tensor.dtype() == x.dtype() && tensor.device() == x.device() &&
                      (!same_sizes || tensor.sizes() == x.sizes()),
                  "{}: {} {} must match x {} (dtype, device{})", op, what, tensor.str(), x.str(),
                  same_sizes ? ", shape" : "");
  TESSERA_REQUIRE(tensor.numel() == 0 || tensor.is_contiguous(), "{}: {} {} must be contiguous", op,
                  what, tensor.str());
}

template <bool kFused>
void norm_kernel(const KernelArgs& args) {
  const char* op = kFused ? "fused_add_rms_norm" : "rms_norm";
  NormLaunch launch{};
  launch.x = &args.inputs[0];
  launch.residual = kFused ? &args.inputs[1] : nullptr;
  launch.weight = &args.inputs[kFused ? 2 : 1];
  launch.out = &args.outputs[0];
  launch.residual_out = kFused ? &args.outputs[1] : nullptr;
  const Tensor& x = *launch.x;
  TESSERA_REQUIRE(x.dim() >= 1, "{}: x {} needs at least one dim", op, x.str());
  launch.hidden = x.sizes().back();
  launch.rows = launch.hidden == 0 ? 0 : x.numel() / launch.hidden;
  launch.eps = static_cast<float>(args.attributes.get_float("eps"));
  require_same(op, "x", x, x, true);
  require_same(op, "output", *launch.out, x, true);
  require_same(op, "weight", *launch.weight, x, false);
  TESSERA_REQUIRE(launch.weight->dim() == 1 && launch.weight->size(0) == launch.hidden,
                  "{}: weight {} must have x's last size {}", op, launch.weight->str(),
                  launch.hidden);
  if constexpr (kFused) {
    require_same(op, "residual", *launch.residual, x, true);
    require_same(op, "residual_out", *launch.residual_out, x, true);
  }
  if (launch.rows == 0) return;
  TESSERA_REQUIRE(launch.rows <= INT32_MAX, "{}: x {} has {} rows; at most {} fit one launch", op,
                  x.str(), launch.rows, INT32_MAX);
  LaunchScope scope(x.device());
  visit_device_float_dtype(op, x.dtype(),
                           [&]<typename T>() { launch_norm<T, kFused>(launch, scope.stream()); });
}

TESSERA_REGISTER_KERNEL("rms_norm", kGpuDeviceType, norm_kernel<false>);
TESSERA_REGISTER_KERNEL("fused_add_rms_norm", kGpuDeviceType, norm_kernel<true>);

}  // namespace
}  // namespace tessera::gpu
