#include "models/rope.h"

#include <cmath>

namespace tessera {

std::vector<double> rope_inverse_frequencies(const ModelConfig& config) {
  int64_t half = config.head_dim / 2;
  std::vector<double> inverse(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inverse[i] = 1.0 / std::pow(config.rope_theta, static_cast<double>(2 * i) / config.head_dim);
  if (config.rope_scaling.type == "linear") {  // positions / factor, as transformers' linear
    for (double& frequency : inverse) frequency /= config.rope_scaling.factor;
  } else if (config.rope_scaling.type == "llama3") {
    // Llama 3.1's scaling: long wavelengths slowed by `factor`, short ones kept, a smooth blend
    // between (transformers' _compute_llama3_parameters).
    const RopeScaling& s = config.rope_scaling;
    double low_wavelength = s.original_max_position_embeddings / s.low_freq_factor;
    double high_wavelength = s.original_max_position_embeddings / s.high_freq_factor;
    for (double& frequency : inverse) {
      double wavelength = 2 * M_PI / frequency;
      if (wavelength > low_wavelength) {
        frequency /= s.factor;
      } else if (wavelength >= high_wavelength) {
        double smooth = (s.original_max_position_embeddings / wavelength - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
        frequency = (1 - smooth) * frequency / s.factor + smooth * frequency;
      }
    }
  }
  return inverse;
}

Tensor make_cos_sin_cache(const ModelConfig& config, int64_t max_positions, Device device) {
  std::vector<double> inverse = rope_inverse_frequencies(config);
  int64_t half = static_cast<int64_t>(inverse.size());
  std::vector<float> table(static_cast<size_t>(max_positions * 2 * half));
  for (int64_t position = 0; position < max_positions; ++position) {
    for (int64_t i = 0; i < half; ++i) {
      double angle = static_cast<double>(position) * inverse[i];
      table[position * 2 * half + i] = static_cast<float>(std::cos(angle));
      table[position * 2 * half + half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return Tensor::from_floats(table, {max_positions, 2 * half}, DType::f32, device);
}

}  // namespace tessera
