// Host-side 16-bit float types. Storage only: arithmetic converts to float (bf16/f16 on the CPU
// compute in f32). Conversions round to nearest even, as the GPU's do.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "runtime/host_device.h"

namespace tessera {

// Host and device (runtime/float8.h's conversions run in kernels too).
TESSERA_HOST_DEVICE inline uint32_t float_bits(float value) {
  return std::bit_cast<uint32_t>(value);
}

TESSERA_HOST_DEVICE inline float bits_float(uint32_t bits) {
  return std::bit_cast<float>(bits);
}

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float value) {  // NOLINT: implicit, like the device types
    uint32_t x = float_bits(value);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
      bits = 0x7fc0;  // quiet NaN
    } else {
      x += 0x7fffu + ((x >> 16) & 1u);
      bits = static_cast<uint16_t>(x >> 16);
    }
  }
  operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float value) : bits(from_float(value)) {}  // NOLINT
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float value) {
    uint32_t x = float_bits(value);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
    if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (x < 0x38800000u) {  // subnormal or zero in half
      if (x < 0x33000000u) return static_cast<uint16_t>(sign);
      // value = mantissa * 2^(exponent - 150); in units of half's 2^-24 that is mantissa >> shift
      uint32_t mantissa = (x & 0x007fffffu) | 0x00800000u;
      int shift = 126 - static_cast<int>(x >> 23);  // 14..24
      uint32_t result = mantissa >> shift;
      uint32_t remainder = mantissa & ((1u << shift) - 1u);
      uint32_t halfway = 1u << (shift - 1);
      if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
      return static_cast<uint16_t>(sign | result);
    }
    uint32_t result = ((x - 0x38000000u) >> 13);
    uint32_t remainder = x & 0x1fffu;
    if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }

  static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0) {
      if (mantissa == 0) return bits_float(sign);
      float value = static_cast<float>(mantissa) * (1.0f / 16777216.0f);  // 2^-24
      return sign ? -value : value;
    }
    if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
};

}  // namespace tessera
