#include "compile/fake_tensor.h"

namespace tessera {

Tensor make_fake_tensor(const TensorMeta& meta, int value_id) {
  auto info = std::make_shared<FakeTensorInfo>();
  info->shape = meta.shape;
  info->value_id = value_id;
  return Tensor::fake(meta.dtype, meta.device, std::move(info));
}

const FakeTensorInfo* fake_tensor_info(const Tensor& tensor) {
  return dynamic_cast<const FakeTensorInfo*>(tensor.fake_info());
}

}  // namespace tessera
