// Device-side building blocks shared by the GPU kernels: the device type of each DType and
// host-side dispatch over them, f32 compute for 16-bit floats, packed (16-byte) loads and stores,
// and warp/block reductions.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/gpu_vendor.h"
#include "runtime/check.h"
#include "runtime/dtype.h"

namespace tessera::gpu {

// ---- DTypes on the device.

// Calls fn.template operator()<T>() with T the device storage type of `dtype`.
template <typename Fn>
decltype(auto) visit_device_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f16:
      return fn.template operator()<gpu_half>();
    case DType::bf16:
      return fn.template operator()<gpu_bfloat16>();
    case DType::i32:
      return fn.template operator()<int32_t>();
    case DType::i64:
      return fn.template operator()<int64_t>();
    default:
      break;
  }
  throw Error(fmt::format("dtype {} has no element type on the device", dtype_name(dtype)));
}

// The same for float dtypes only; other dtypes throw naming the op (and instantiate nothing).
template <typename Fn>
decltype(auto) visit_device_float_dtype(const char* op, DType dtype, Fn&& fn) {
  return visit_device_dtype(dtype, [&]<typename T>() -> decltype(fn.template operator()<float>()) {
    if constexpr (std::is_integral_v<T>) {
      throw Error(fmt::format("{}: dtype {} is not supported on {}; use f32, f16 or bf16", op,
                              dtype_name(dtype), device_type_name(kGpuDeviceType)));
    } else {
      return fn.template operator()<T>();
    }
  });
}

// f16/bf16 compute in f32; f32 and integers compute in their own type.
template <typename T>
using ComputeType = std::conditional_t<std::is_integral_v<T>, T, float>;

template <typename T>
__device__ __forceinline__ ComputeType<T> to_compute(T value) {
  if constexpr (std::is_integral_v<T> || std::is_same_v<T, float>) {
    return value;
  } else {
    return static_cast<float>(value);
  }
}

// From the compute type back to storage; f16/bf16 round to nearest even.
template <typename T>
__device__ __forceinline__ T from_compute(ComputeType<T> value) {
  if constexpr (std::is_integral_v<T> || std::is_same_v<T, float>) {
    return value;
  } else {
    return T(value);
  }
}

template <typename T>
__device__ __forceinline__ float to_float(T value) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<float>(value);
  } else {
    return to_compute(value);
  }
}

// ---- Packed memory access.

// E elements moved as one aligned access (16 bytes when E * sizeof(T) >= 16).
template <typename T, int E>
struct alignas(sizeof(T) * E < 16 ? sizeof(T) * E : 16) Pack {
  T values[E];
};

// Elements per 16-byte access.
template <typename T>
inline constexpr int kPackElements = 16 / sizeof(T) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;

template <typename T, int E>
inline bool pack_aligned(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % alignof(Pack<T, E>) == 0;
}

template <int E, typename T>
__device__ __forceinline__ Pack<T, E> load_pack(const T* ptr) {
  return *reinterpret_cast<const Pack<T, E>*>(ptr);
}

template <int E, typename T>
__device__ __forceinline__ void store_pack(T* ptr, const Pack<T, E>& pack) {
  *reinterpret_cast<Pack<T, E>*>(ptr) = pack;
}

// ---- Reductions. A Reducer has a value type Acc with
//   static Acc combine(Acc a, Acc b)        (associative; order-independent results up to rounding)
//   static Acc shuffle_xor(Acc a, int mask) (exchanges a with lane ^ mask)

// f32 maximum and addition, the reductions most kernels need.
struct FloatMax {
  using Acc = float;
  __device__ static float combine(float a, float b) { return fmaxf(a, b); }
  __device__ static float shuffle_xor(float value, int mask) { return GPU_SHFL_XOR(value, mask); }
};

struct FloatSum {
  using Acc = float;
  __device__ static float combine(float a, float b) { return a + b; }
  __device__ static float shuffle_xor(float value, int mask) { return GPU_SHFL_XOR(value, mask); }
};

// Combines the values of `lanes` consecutive lanes (a power of two up to the warp size); every
// lane of the group ends with the result.
template <typename Reducer, int lanes>
__device__ __forceinline__ typename Reducer::Acc group_reduce(typename Reducer::Acc value) {
#pragma unroll
  for (int mask = lanes / 2; mask > 0; mask /= 2) {
    value = Reducer::combine(value, Reducer::shuffle_xor(value, mask));
  }
  return value;
}

// Combines one value per thread across a block of kThreads threads (a multiple of the warp size);
// every thread gets the result. `scratch` holds kThreads / warp size values.
template <typename Reducer, int kThreads>
__device__ __forceinline__ typename Reducer::Acc block_reduce(typename Reducer::Acc value,
                                                              typename Reducer::Acc* scratch) {
  constexpr int kWarps = kThreads / GPU_WARP_SIZE;
  static_assert(kThreads % GPU_WARP_SIZE == 0);
  value = group_reduce<Reducer, GPU_WARP_SIZE>(value);
  if constexpr (kWarps > 1) {
    if (threadIdx.x % GPU_WARP_SIZE == 0) scratch[threadIdx.x / GPU_WARP_SIZE] = value;
    __syncthreads();
    // Every thread combines the per-warp values in the same order, so all get the same result.
    value = scratch[0];
#pragma unroll
    for (int warp = 1; warp < kWarps; ++warp) value = Reducer::combine(value, scratch[warp]);
    __syncthreads();  // scratch may be reused by the caller
  }
  return value;
}

}  // namespace tessera::gpu
