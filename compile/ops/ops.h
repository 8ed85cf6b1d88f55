// The op API model code is written against. Each call goes through dispatch
// (compile/trace/dispatch.h): eager runs kernels, tracing records graph nodes. Semantics follow
// PyTorch.
//
// Kernel contract (kernels/): outputs arrive contiguous; inputs are contiguous except for ops
// registered with strided_inputs (pointwise, where, cast), whose inputs may have any strides,
// including 0 for broadcast dims (the dispatcher expands them to the output shape first).
// bf16/f16 compute in f32.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace tessera::ops {

// Pointwise unary (float dtypes; neg also ints). Output: same shape and dtype.
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor silu(const Tensor& x);  // x * sigmoid(x)
// approximate: "none" (erf form, PyTorch's default) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor pow_scalar(const Tensor& x, double exponent);  // attr "exponent"
Tensor add_scalar(const Tensor& x, double scalar);    // attr "scalar"
Tensor mul_scalar(const Tensor& x, double scalar);    // attr "scalar"
Tensor softcap(const Tensor& x, double cap);          // cap * tanh(x / cap); attr "cap"

// Pointwise binary with broadcasting; both inputs of one dtype (add/sub/mul/maximum also ints).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
// condition (i32 or i64, nonzero is true) ? a : b, broadcasting all three.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

// Between any two dtypes (float -> int truncates toward zero). attr "dtype".
Tensor cast(const Tensor& x, DType dtype);

// Last-dim reductions; attr "keepdim" (default false). sum/mean/max: float dtypes, same dtype
// out (accumulated in f32). argmax: float dtypes in, i64 out, first index of the maximum.
Tensor sum(const Tensor& x, bool keepdim = false);
Tensor mean(const Tensor& x, bool keepdim = false);
Tensor max(const Tensor& x, bool keepdim = false);
Tensor argmax(const Tensor& x, bool keepdim = false);
Tensor softmax(const Tensor& x);  // over the last dim

// a [..., M, K] @ b [K, N] or b [..., K, N] (same leading dims) -> [..., M, N].
Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., K], weight [N, K], bias [N] -> x @ weight^T + bias, [..., N].
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = {});
// x [..., K] @ (weight [N, K] f8_e4m3 scaled by weight_scale)^T -> [..., N], x quantized to e4m3
// by `activation` ("token", "group", or "fixed" with input_scale): kernels/quant/fp8_scaling.h.
Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                  const std::string& activation, const std::optional<Tensor>& input_scale = {});
// weight [V, D], ids (i32/i64) [...] -> [..., D]; ids outside [0, V) are an error.
Tensor embedding(const Tensor& weight, const Tensor& ids);
// A shard of a larger table: weight holds its rows [vocab_start, vocab_start + V); ids outside
// them give zero rows (tensor parallelism sums the shards' rows). attr "vocab_start".
Tensor embedding_shard(const Tensor& weight, const Tensor& ids, int64_t vocab_start);
// Tensor parallelism (runtime/communicator.h): the sum over ranks, and rows stacked by rank.
Tensor all_reduce(const Tensor& x);
Tensor all_gather(const Tensor& x, int64_t world_size);

// Shape ops. view/reshape: one size may be -1. slice: attrs dim, start, end, step (end clamps).
Tensor view(const Tensor& x, std::vector<int64_t> shape);     // needs a contiguous input
Tensor reshape(const Tensor& x, std::vector<int64_t> shape);  // a view when possible, else a copy
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor contiguous(const Tensor& x);
Tensor cat(std::span<const Tensor> tensors, int64_t dim);

// Custom ops (compile/ops/custom): own kernels, plus a decomposition used when the compilation
// config disables them (custom_ops: "-rms_norm") so the fuser sees primitives.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// Returns {out, residual_out}: residual_out = x + residual, out = rms_norm(residual_out).
std::pair<Tensor, Tensor> fused_add_rms_norm(const Tensor& x, const Tensor& residual,
                                             const Tensor& weight, double eps);
// Returns {query_out, key_out}. See compile/ops/custom/rotary_embedding.cpp.
std::pair<Tensor, Tensor> rotary_embedding(const Tensor& positions, const Tensor& query,
                                           const Tensor& key, const Tensor& cos_sin_cache,
                                           int64_t head_size, bool is_neox);
Tensor silu_and_mul(const Tensor& x);  // silu(x[..., :d]) * x[..., d:]
// Mixtures of experts (compile/ops/custom/fused_moe.cpp). router_logits [T, E] -> f32 [T, E]:
// softmax over the experts, the top_k kept (renormalized to sum 1 when renormalize), zero
// elsewhere.
Tensor moe_routing(const Tensor& router_logits, int64_t top_k, bool renormalize);
// x [T, H], router_logits [T, E], gate_up_weights [L, 2I, H] (gate rows, then up rows),
// down_weights [L, H, I] for experts first_expert ... first_expert + L - 1 of the E -> [T, H]:
// the sum over those of the top_k experts of their routing weight times
// down(silu(gate x) * up x). (L < E: expert parallelism; the ranks' sums add up.)
Tensor fused_moe(const Tensor& x, const Tensor& router_logits, const Tensor& gate_up_weights,
                 const Tensor& down_weights, int64_t top_k, bool renormalize,
                 int64_t first_expert = 0);
// The splitting op: paged causal attention for `layer`, metadata from the forward context.
// sliding_window > 0: a query at position p sees keys at positions > p - sliding_window;
// logit_softcap > 0: scores become tanh(scores / cap) * cap before the mask (Gemma 2).
Tensor attention(const Tensor& query, const Tensor& key, const Tensor& value, int64_t layer,
                 int64_t num_heads, int64_t num_kv_heads, int64_t head_size, double scale,
                 int64_t sliding_window = 0, double logit_softcap = 0);
Tensor gelu_and_mul(const Tensor& x, const std::string& approximate = "none");

}  // namespace tessera::ops
