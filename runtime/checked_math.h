// Overflow-checked arithmetic for numbers that come from outside (file headers, configs,
// requests): every result is exact or nullopt, never wrapped, so that a size multiplied from
// untrusted numbers can be compared with what a file or a device holds before it is used.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace tessera {

template <typename Integer>
std::optional<Integer> checked_multiply(Integer a, Integer b) {
  Integer product;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

template <typename Integer>
std::optional<Integer> checked_add(Integer a, Integer b) {
  Integer sum;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

// The element count of a shape: nullopt when a size is negative or the product overflows int64,
// also the product of the nonzero sizes (the strides of a shape with a zero size still hold it).
std::optional<int64_t> checked_numel(std::span<const int64_t> sizes);
// The bytes of a shape of `element_size`-byte elements: nullopt as checked_numel, or when the
// byte count overflows int64.
std::optional<int64_t> checked_nbytes(std::span<const int64_t> sizes, size_t element_size);

}  // namespace tessera
