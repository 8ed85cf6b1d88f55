// Scalar activation functions shared by the CPU kernels (pointwise silu/gelu and the fused
// *_and_mul custom ops), computed in f32.
#pragma once

#include <cmath>
#include <string>

#include "kernels/attributes.h"
#include "kernels/check.h"

namespace tessera::cpu {

inline float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

// approximate=false: the erf form (PyTorch's default); true: the tanh approximation.
inline float gelu(float x, bool tanh_form) {
  if (tanh_form) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
  constexpr float kInverseSqrt2 = 0.7071067811865476f;
  return 0.5f * x * (1.0f + std::erf(x * kInverseSqrt2));
}

// Reads attribute "approximate" ("none" or "tanh"; default "none"); true for "tanh".
inline bool gelu_tanh_form(const char* op, const Attributes& attributes) {
  const std::string approximate = attributes.get_string("approximate", "none");
  TESSERA_REQUIRE(approximate == "none" || approximate == "tanh",
                  "{}: approximate='{}' is not valid; use 'none' or 'tanh'", op, approximate);
  return approximate == "tanh";
}

}  // namespace tessera::cpu
