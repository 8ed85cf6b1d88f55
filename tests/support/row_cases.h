// Functions made of the row work of an LLM layer (norms, gated activations, softmax, rope,
// embedding), traced with a dynamic token count and fused: the fused kernels the code generator
// tests (C++, CUDA, HIP) render and compile.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compile/compiled_plan.h"
#include "compile/custom_op_config.h"
#include "compile/trace/tracer.h"
#include "runtime/tensor.h"

namespace tessera::testing {

// A function made of the row work of an LLM layer; every input's dim 0 is the token count.
struct RowCase {
  std::string name;
  TensorFunction function;
  std::function<std::vector<Tensor>(int64_t tokens)> inputs;
};

// rms_norm (narrow, wide, per head), fused_add_rms_norm, grouped softmax, silu/gelu_and_mul,
// softmax with max and mean, both ropes, embedding + add, on `device` in `dtype`.
std::vector<RowCase> row_cases(DType dtype, Device device);
// Token ids in [0, limit), `tokens` of them.
Tensor token_ids(int64_t tokens, int64_t limit, Device device);
// Dim 0 of each of `num_inputs` inputs is the token count.
std::vector<DynamicDim> token_dims(size_t num_inputs);
CustomOpConfig custom_ops_off();
// The fused kernels of `row_case` traced on the CPU with custom ops decomposed: the passes of
// compile_graph up to codegen (no compiler runs).
CompiledPlan fused_plan(const RowCase& row_case);

}  // namespace tessera::testing
