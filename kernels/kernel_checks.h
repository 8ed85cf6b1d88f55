// Argument checks every backend's kernels share, so the CPU and GPU kernels of one op accept
// and refuse exactly the same arguments with the same messages. The op's meta function has
// already checked user input; these guard the kernel contract (dtypes, sizes, layout).
#pragma once

#include <cstdint>

#include "kernels/quant/fp8_scaling.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor.h"

namespace tessera {

void require_dtype(const char* op, const char* what, const Tensor& tensor, DType expected);
void require_sizes(const char* op, const char* what, const Tensor& tensor, const Shape& expected);
// Zero-size tensors hold no elements, so any strides will do.
void require_contiguous(const char* op, const char* what, const Tensor& tensor);
void require_float_contiguous(const char* op, const char* what, const Tensor& tensor);
// Product of all dims but the last.
int64_t leading_numel(const Tensor& tensor);

// out[..., M, N] = a[..., M, K] @ b: checks the arguments; `batched` when b has a's rank.
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batches = 1;  // product of a's leading dims when batched, else 1
  bool batched = false;
};
MatmulShape check_matmul(const Tensor& a, const Tensor& b, const Tensor& out);

// out[..., N] = x[..., K] @ weight[N, K]^T (+ bias[N]); returns {rows, N, K}.
MatmulShape check_linear(const Tensor& x, const Tensor& weight, const Tensor* bias,
                         const Tensor& out);

// The linear kernel's arguments (x, weight[, bias] -> out), checked; `shape` is {rows, N, K}.
struct LinearArgs {
  const Tensor& x;
  const Tensor& weight;
  const Tensor* bias;
  const Tensor& out;
  MatmulShape shape;
};
LinearArgs check_linear(const KernelArgs& args);

// The fp8_linear kernel's arguments (x, weight, weight_scale[, input_scale] -> out), checked:
// contiguous, on one device, shapes as compile/ops/fp8_linear.cpp states them.
struct Fp8LinearArgs {
  const Tensor& x;
  const Tensor& weight;        // f8_e4m3 [N, K]
  const Tensor& weight_scale;  // f32 [N], or [ceil(N/128), ceil(K/128)] when block_scaled
  const Tensor* input_scale;   // f32 [1] with activation fixed, else nullptr
  const Tensor& out;
  int64_t m = 0, n = 0, k = 0;
  bool block_scaled = false;
  Fp8ActivationScale activation = Fp8ActivationScale::token;
};
Fp8LinearArgs check_fp8_linear(const KernelArgs& args);

// The embedding kernel's arguments (weight [V, D], ids -> out [..., D]), checked.
struct EmbeddingArgs {
  const Tensor& weight;
  const Tensor& ids;
  const Tensor& out;
  int64_t vocab = 0, width = 0, count = 0;
  // The first row of a vocabulary shard this table holds (ids outside it give zero rows); < 0:
  // the whole table, where an id outside it is an error.
  int64_t vocab_start = -1;
};
EmbeddingArgs check_embedding(const KernelArgs& args);

// rotary_embedding (positions [T] i32/i64, query [T, Hq * head_size], key [T, Hk * head_size],
// cos_sin_cache [max_position, rot_dim]) -> (query_out, key_out) of the query's and key's shapes
// and dtype, all on one device. Every tensor is contiguous, except that with `strided_rows` query
// and key may be column slices of wider rows (one qkv row), as the GPU kernel reads them.
struct RotaryShape {
  int64_t tokens = 0;
  int64_t head_size = 0;
  int64_t rot_dim = 0;
  int64_t max_position = 0;
  bool is_neox = true;
};
RotaryShape check_rotary_embedding(const KernelArgs& args, bool strided_rows);

// take_sampled_ids (kernels/sampling.h): contiguous sampled ids, and i32 token ids and output of
// one size.
void check_take_sampled_ids(const Tensor& sampled, const Tensor& tokens, const Tensor& out);
void check_apply_token_mask(const Tensor& masks, const Tensor& rows, const Tensor& logits);

}  // namespace tessera
