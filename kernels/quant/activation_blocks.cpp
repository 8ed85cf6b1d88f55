#include "kernels/quant/activation_blocks.h"

#include <algorithm>
#include <cmath>

#include "runtime/check.h"

namespace tessera::quant {

void quantize_activation(const float* x, int64_t count, int64_t group, int8_t* quants,
                         float* scales, int16_t* group_sums) {
  TESSERA_CHECK(group % kActivationBlockElements == 0 && count % group == 0,
                "activation rows of {} are not whole scale groups of {} (blocks of {})", count,
                group, kActivationBlockElements);
  for (int64_t first = 0; first < count; first += group) {
    float largest = 0;
    for (int64_t i = first; i < first + group; ++i) largest = std::max(largest, std::fabs(x[i]));
    const float scale = largest / 127.0f;
    const float inverse = largest > 0 ? 127.0f / largest : 0.0f;
    for (int64_t b = first / kActivationBlockElements;
         b < (first + group) / kActivationBlockElements; ++b) {
      const float* values = x + b * kActivationBlockElements;
      int8_t* block = quants + b * kActivationBlockElements;
      scales[b] = scale;
      int sums[2] = {0, 0};
      for (int i = 0; i < kActivationBlockElements; ++i) {
        const int quant = static_cast<int>(std::nearbyint(values[i] * inverse));
        block[i] = static_cast<int8_t>(std::clamp(quant, -127, 127));
        sums[i / kActivationGroupElements] += block[i];
      }
      group_sums[2 * b] = static_cast<int16_t>(sums[0]);
      group_sums[2 * b + 1] = static_cast<int16_t>(sums[1]);
    }
  }
}

}  // namespace tessera::quant
