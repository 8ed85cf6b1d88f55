// The rotary embedding's cos/sin table: [max_positions, head_dim] with cos in the first half and
// sin in the second (the layout of the rotary_embedding op), from rope_theta and optional llama3
// frequency scaling. Computed in double, stored f32.
#pragma once

#include "models/model_config.h"
#include "runtime/tensor.h"

namespace tessera {

std::vector<double> rope_inverse_frequencies(const ModelConfig& config);
Tensor make_cos_sin_cache(const ModelConfig& config, int64_t max_positions, Device device);

}  // namespace tessera
