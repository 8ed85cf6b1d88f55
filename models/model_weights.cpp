#include "models/model_weights.h"

#include "runtime/check.h"

namespace tessera {

const Tensor& ModelWeights::get(const std::string& name) const {
  auto it = tensors.find(name);
  TESSERA_REQUIRE(it != tensors.end(), "{}: the model has no tensor '{}' ({} tensors loaded)",
                  source, name, tensors.size());
  return it->second;
}

const Tensor& ModelWeights::get(const std::string& name, const Shape& expected_shape) const {
  const Tensor& tensor = get(name);
  TESSERA_REQUIRE(tensor.sizes() == expected_shape, "{}: tensor '{}' has shape {}, expected {}",
                  source, name, shape_str(tensor.sizes()), shape_str(expected_shape));
  return tensor;
}

size_t ModelWeights::total_bytes() const {
  size_t bytes = 0;
  for (const auto& [name, tensor] : tensors) bytes += tensor.nbytes();
  return bytes;
}

}  // namespace tessera
