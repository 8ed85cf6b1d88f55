// Fake tensors: what flows through model code while tracing. No storage; a symbolic shape and
// the id of the graph value they stand for. sym_size works on fake and real tensors alike, so
// model code that must not specialize on a size asks for it this way.
#pragma once

#include <memory>

#include "compile/ir/op_registry.h"

namespace tessera {

struct FakeTensorInfo : FakeInfo {
  SymShape shape;
  int value_id = -1;  // the graph value this tensor is, set by the tracer

  int64_t rank() const override { return static_cast<int64_t>(shape.size()); }
  int64_t concrete_size(int64_t dim, const std::source_location& where) const override;
};

Tensor make_fake_tensor(const TensorMeta& meta, int value_id);
// The fake part of a tensor; nullptr for a real one.
const FakeTensorInfo* fake_tensor_info(const Tensor& tensor);

SymInt sym_size(const Tensor& tensor, int64_t dim);
SymShape sym_sizes(const Tensor& tensor);

}  // namespace tessera
