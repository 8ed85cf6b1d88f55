// Element types of tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/float8.h"
#include "runtime/half.h"

namespace tessera {

// f8_e4m3 is FP8 (runtime/float8.h): one byte per element, read only by the FP8 linear with its
// scales beside it (models/linear_weight.h). The quantized dtypes are ggml's block formats (q8_0:
// blocks of 32 int8 with an f16 scale; the _k formats: super-blocks of 256): a tensor of one holds
// whole blocks along its last dim, so it has no element size; its bytes are block_bytes() per
// block_elements() elements.
enum class DType : uint8_t {
  f32,
  f16,
  bf16,
  i32,
  i64,
  f8_e4m3,
  q4_0,
  q4_1,
  q5_0,
  q5_1,
  q8_0,
  q2_k,
  q3_k,
  q4_k,
  q5_k,
  q6_k
};

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64};
inline constexpr DType kFloatDTypes[] = {DType::f32, DType::f16, DType::bf16};
inline constexpr DType kQuantizedDTypes[] = {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                                             DType::q8_0, DType::q2_k, DType::q3_k, DType::q4_k,
                                             DType::q5_k, DType::q6_k};

// Bytes per element; a quantized dtype has none (an invariant failure: use storage_bytes).
size_t element_size(DType dtype);
const char* dtype_name(DType dtype);
inline bool is_quantized(DType dtype) {
  return dtype >= DType::q4_0;
}

// ggml's block sizes (elements, bytes) of a quantized dtype: an f16 scale (and min) per block,
// then the packed quants; the _k formats pack sub-block scales into each super-block of 256.
// {1, 0} for a plain dtype. Constant, so device code sizes its blocks from it too.
struct QuantizedBlock {
  int64_t elements;
  int64_t bytes;
};
constexpr QuantizedBlock quantized_block(DType dtype) {
  switch (dtype) {
    case DType::q4_0:
      return {32, 18};
    case DType::q4_1:
      return {32, 20};
    case DType::q5_0:
      return {32, 22};
    case DType::q5_1:
      return {32, 24};
    case DType::q8_0:
      return {32, 34};
    case DType::q2_k:
      return {256, 84};
    case DType::q3_k:
      return {256, 110};
    case DType::q4_k:
      return {256, 144};
    case DType::q5_k:
      return {256, 176};
    case DType::q6_k:
      return {256, 210};
    default:
      return {1, 0};
  }
}

// Elements per block (1 for the plain dtypes) and bytes per block (element_size for them).
int64_t block_elements(DType dtype);
size_t block_bytes(DType dtype);
// The bytes `count` elements take: whole blocks for a quantized dtype (count must be a multiple
// of block_elements), nullopt when that overflows int64.
std::optional<int64_t> checked_storage_bytes(DType dtype, int64_t count);
int64_t storage_bytes(DType dtype, int64_t count);  // TESSERA_CHECKs what the checked form returns
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
template <>
struct HostType<DType::f8_e4m3> {
  using type = Float8E4M3;
};

// A quantized dtype has no host element type, and FP8 is only read with its scales: visiting
// either is a bug in the caller.
[[noreturn]] void throw_quantized_visit(DType dtype);

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
    case DType::f8_e4m3:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q8_0:
    case DType::q2_k:
    case DType::q3_k:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
      throw_quantized_visit(dtype);
  }
  return fn.template operator()<float>();
}

// Calls fn<U>() with the unsigned integer type as wide as one element: kernels that only move
// elements (copy, where, gathers) need one instantiation per width, not per dtype. The CPU and
// GPU kernels share it: the width is the same on every device.
template <typename Fn>
decltype(auto) visit_element_bits(DType dtype, Fn&& fn) {
  switch (element_size(dtype)) {
    case 1:
      return fn.template operator()<uint8_t>();
    case 2:
      return fn.template operator()<uint16_t>();
    case 4:
      return fn.template operator()<uint32_t>();
    default:
      return fn.template operator()<uint64_t>();
  }
}

}  // namespace tessera
