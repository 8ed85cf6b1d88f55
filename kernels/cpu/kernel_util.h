// Dtype dispatch and argument checks shared by the CPU kernels.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/kernel_checks.h"
#include "runtime/check.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace tessera::cpu {

// f16/bf16 compute in f32; integers compute in their own type.
template <typename T>
using ComputeType = std::conditional_t<std::is_integral_v<T>, T, float>;

// Elements below this count are not worth handing to other threads.
inline constexpr int64_t kParallelGrain = 32768;

// visit_dtype restricted to f32/f16/bf16; other dtypes throw naming the op.
template <typename Fn>
decltype(auto) visit_float_dtype(const char* op, DType dtype, Fn&& fn) {
  return visit_dtype(dtype, [&]<typename T>() -> decltype(fn.template operator()<float>()) {
    if constexpr (std::is_integral_v<T>) {
      throw Error(fmt::format("{}: dtype {} is not supported on the CPU; use f32, f16 or bf16", op,
                              dtype_name(dtype)));
    } else {
      return fn.template operator()<T>();
    }
  });
}

}  // namespace tessera::cpu
