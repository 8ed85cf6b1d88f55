// FP8 e4m3 ("float8_e4m3fn", the format of FP8 checkpoints and of Hopper's FP8 tensor cores): a
// sign, 4 exponent bits (bias 7) and 3 mantissa bits; no infinities, 0x7f/0xff are NaN, the largest
// value is 448. Storage only, like half.h: arithmetic converts to float. The conversions run on the
// host and in kernels (the FP8 KV cache's), so both round alike.
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/half.h"

namespace tessera {

inline constexpr float kFloat8E4M3Max = 448.0f;

struct Float8E4M3 {
  uint8_t bits = 0;
  Float8E4M3() = default;
  TESSERA_HOST_DEVICE Float8E4M3(float value)  // NOLINT: implicit, like Half
      : bits(from_float(value)) {}
  TESSERA_HOST_DEVICE operator float() const { return to_float(bits); }

  // Rounds to nearest even. Beyond +-448 it saturates to +-448 (quantizers clamp first, so no
  // finite input becomes NaN); NaN stays NaN.
  TESSERA_HOST_DEVICE static uint8_t from_float(float value) {
    uint32_t x = float_bits(value);
    const auto sign = static_cast<uint8_t>((x >> 24) & 0x80u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
    if (x >= float_bits(kFloat8E4M3Max)) return static_cast<uint8_t>(sign | 0x7eu);
    if (x < 0x3c800000u) {  // below 2^-6, the smallest normal: multiples of 2^-9
      const auto quanta = static_cast<uint32_t>(rintf(bits_float(x) * 512.0f));  // to even
      return static_cast<uint8_t>(sign | quanta);  // 8 quanta is the smallest normal's code
    }
    x += 0x7ffffu + ((x >> 20) & 1u);  // round the 23-bit mantissa to 3 bits, nearest even
    return static_cast<uint8_t>(sign | (((x >> 23) - 120u) << 3) | ((x >> 20) & 7u));
  }

  TESSERA_HOST_DEVICE static float to_float(uint8_t code) {
    const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
    const uint32_t exponent = (code >> 3) & 0xfu;
    const uint32_t mantissa = code & 7u;
    if (exponent == 15 && mantissa == 7) return bits_float(sign | 0x7fc00000u);
    if (exponent == 0) {
      const float value = static_cast<float>(mantissa) * (1.0f / 512.0f);
      return sign ? -value : value;
    }
    return bits_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
  }
};

}  // namespace tessera
