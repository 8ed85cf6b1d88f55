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
  switch (dtype) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f16:
      return fn.template operator()<Half>();
    case DType::bf16:
      return fn.template operator()<BFloat16>();
    default:
      break;
  }
  throw Error(fmt::format("{}: dtype {} is not supported on the CPU; use f32, f16 or bf16", op,
                          dtype_name(dtype)));
}

}  // namespace tessera::cpu
