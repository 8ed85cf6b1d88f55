// Quantized test data shared by the tests and the labs: random blocks of ggml's formats whose
// scales are those of ordinary weights, and a quantized tensor's values.
#pragma once

#include <cstdint>

#include "runtime/tensor.h"

namespace tessera::testing {

// Random bytes in `dtype`'s blocks (a GGUF block format) with f16 scales of ordinary weights,
// uniform in [0.001, 0.03]; on the CPU.
Tensor random_quantized(DType dtype, Shape sizes, uint32_t seed);
// The values of a quantized tensor (on any device) as f32 on the CPU.
Tensor dequantized(const Tensor& quantized);

}  // namespace tessera::testing
