// Fake tensors: what flows through model code while tracing. No storage; a symbolic shape and
// the id of the graph value they stand for.
#pragma once

#include <memory>

#include "compile/ops/registry.h"

namespace tessera {

struct FakeTensorInfo : FakeInfo {
  SymShape shape;
  int value_id = -1;  // the graph value this tensor is, set by the tracer
};

Tensor make_fake_tensor(const TensorMeta& meta, int value_id);
// The symbolic shape of a fake tensor; nullptr for a real one.
const FakeTensorInfo* fake_tensor_info(const Tensor& tensor);

}  // namespace tessera
