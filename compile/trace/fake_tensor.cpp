#include "compile/trace/fake_tensor.h"

namespace tessera {

int64_t FakeTensorInfo::concrete_size(int64_t dim, const std::source_location& where) const {
  return shape.at(static_cast<size_t>(dim)).guard_int("Tensor::size() on a traced tensor", where);
}

Tensor make_fake_tensor(const TensorMeta& meta, int value_id) {
  auto info = std::make_shared<FakeTensorInfo>();
  info->shape = meta.shape;
  info->value_id = value_id;
  return Tensor::fake(meta.dtype, meta.device, std::move(info));
}

const FakeTensorInfo* fake_tensor_info(const Tensor& tensor) {
  return dynamic_cast<const FakeTensorInfo*>(tensor.fake_info());
}

SymInt sym_size(const Tensor& tensor, int64_t dim) {
  int64_t wrapped = wrap_dim(dim, tensor.dim(), "sym_size");
  if (const FakeTensorInfo* fake = fake_tensor_info(tensor)) return fake->shape[wrapped];
  return SymInt(tensor.sizes()[wrapped]);
}

SymShape sym_sizes(const Tensor& tensor) {
  if (const FakeTensorInfo* fake = fake_tensor_info(tensor)) return fake->shape;
  return to_sym_shape(tensor.sizes());
}

}  // namespace tessera
