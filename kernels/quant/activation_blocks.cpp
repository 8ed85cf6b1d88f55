#include "kernels/quant/activation_blocks.h"

#include <algorithm>
#include <cmath>

#include "runtime/check.h"

namespace tessera::quant {

void quantize_activation(const float* x, int64_t count, ActivationBlock* out) {
  TESSERA_CHECK(count % kActivationBlockElements == 0,
                "activation rows of {} are not whole blocks of {}", count,
                kActivationBlockElements);
  for (int64_t b = 0; b < count / kActivationBlockElements; ++b) {
    const float* values = x + b * kActivationBlockElements;
    float largest = 0;
    for (int i = 0; i < kActivationBlockElements; ++i)
      largest = std::max(largest, std::fabs(values[i]));
    ActivationBlock& block = out[b];
    block.scale = largest / 127.0f;
    const float inverse = largest > 0 ? 127.0f / largest : 0.0f;
    int sums[2] = {0, 0};
    for (int i = 0; i < kActivationBlockElements; ++i) {
      const int quant = static_cast<int>(std::nearbyint(values[i] * inverse));
      block.quants[i] = static_cast<int8_t>(std::clamp(quant, -127, 127));
      sums[i / 16] += block.quants[i];
    }
    block.half_sums[0] = static_cast<int16_t>(sums[0]);
    block.half_sums[1] = static_cast<int16_t>(sums[1]);
  }
}

}  // namespace tessera::quant
