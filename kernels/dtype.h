// Element types of tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/half.h"

namespace tessera {

enum class DType : uint8_t { f32, f16, bf16, i32, i64 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64};
inline constexpr DType kFloatDTypes[] = {DType::f32, DType::f16, DType::bf16};

size_t element_size(DType dtype);
const char* dtype_name(DType dtype);
// Parses "f32", "float32", "bf16", "bfloat16", ...; throws naming the valid choices.
DType parse_dtype(std::string_view name);
inline bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16;
}

// Maps a DType to its C++ storage type on the host.
template <DType D>
struct HostType;
template <>
struct HostType<DType::f32> {
  using type = float;
};
template <>
struct HostType<DType::f16> {
  using type = Half;
};
template <>
struct HostType<DType::bf16> {
  using type = BFloat16;
};
template <>
struct HostType<DType::i32> {
  using type = int32_t;
};
template <>
struct HostType<DType::i64> {
  using type = int64_t;
};

// Calls fn(HostType{}) for the runtime dtype: visit_dtype(dt, [&]<typename T>() {...}).
template <typename Fn>
decltype(auto) visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      return fn.template operator()<float>();
    case DType::f16:
      return fn.template operator()<Half>();
    case DType::bf16:
      return fn.template operator()<BFloat16>();
    case DType::i32:
      return fn.template operator()<int32_t>();
    case DType::i64:
      return fn.template operator()<int64_t>();
  }
  return fn.template operator()<float>();
}

// Calls fn<U>() with the unsigned integer type as wide as one element: kernels that only move
// elements (copy, where, gathers) need one instantiation per width, not per dtype. The CPU and
// GPU kernels share it: the width is the same on every device.
template <typename Fn>
decltype(auto) visit_element_bits(DType dtype, Fn&& fn) {
  switch (element_size(dtype)) {
    case 2:
      return fn.template operator()<uint16_t>();
    case 4:
      return fn.template operator()<uint32_t>();
    default:
      return fn.template operator()<uint64_t>();
  }
}

}  // namespace tessera
