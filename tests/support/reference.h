// A float64 reference for every op in compile/ops/ops.h, written independently of the kernels:
// plain loops over row-major values, PyTorch semantics. The op conformance test compares every
// kernel against it. Inputs carry values only (no dtype): the caller hands in exactly the values
// the kernel sees, already rounded to the input dtype.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/attributes.h"
#include "runtime/dtype.h"

namespace tessera::test {

struct RefTensor {
  std::vector<int64_t> sizes;
  std::vector<double> values;  // row-major

  int64_t numel() const;
};

// Runs `op` on `inputs` in float64. Attributes missing from `attributes` take the defaults
// documented in ops.h. Throws std::invalid_argument for an op it does not know and for
// arguments that break the op's contract.
std::vector<RefTensor> reference_op(const std::string& op, std::span<const RefTensor> inputs,
                                    const Attributes& attributes);

// Causal attention of one sequence in float64. `keys` and `values` are [seq_len, num_kv_heads *
// head_size]: every position of the sequence, cached prefix and new tokens. `query` is
// [new_tokens, num_heads * head_size], the queries of the last new_tokens positions; query head h
// reads kv head h / (num_heads / num_kv_heads). Returns [new_tokens, num_heads * head_size].
RefTensor reference_causal_attention(const RefTensor& query, const RefTensor& keys,
                                     const RefTensor& values, int64_t num_heads,
                                     int64_t num_kv_heads, double scale);

// Rounds `value` to the nearest value of `dtype` (round half to even for f32/f16/bf16, with
// subnormals and overflow to infinity; truncation toward zero for integer dtypes). Independent
// of runtime/half.h so that the two can check each other.
double round_to_dtype(double value, DType dtype);

// fused_moe's worst error in `got` (its output's values) over the bound the op conformance test
// allows: `rounding` times the float64 result's magnitude (the same op on |inputs|, over the
// experts the signed router logits choose) plus its |value|. At most 1 passes.
double fused_moe_error_over_bound(std::span<const RefTensor> inputs, const Attributes& attributes,
                                  std::span<const double> got, double rounding);

// Multi-index of a row-major flat index, for readable failure messages.
std::vector<int64_t> unravel_index(int64_t flat_index, std::span<const int64_t> sizes);

}  // namespace tessera::test
