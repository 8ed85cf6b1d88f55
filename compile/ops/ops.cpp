// The ops:: functions: each looks its op up once and dispatches.
#include "compile/ops/ops.h"

#include "compile/trace/dispatch.h"
#include "runtime/check.h"

namespace tessera::ops {
namespace {

Tensor call(const char* name, std::initializer_list<Tensor> inputs,
            const Attributes& attributes = {}) {
  const OpDef& op = OpRegistry::global().get(name);
  std::vector<Tensor> inputs_vector(inputs);
  return call_op(op, inputs_vector, attributes).at(0);
}

}  // namespace

Tensor neg(const Tensor& x) {
  return call("neg", {x});
}
Tensor exp(const Tensor& x) {
  return call("exp", {x});
}
Tensor log(const Tensor& x) {
  return call("log", {x});
}
Tensor sqrt(const Tensor& x) {
  return call("sqrt", {x});
}
Tensor rsqrt(const Tensor& x) {
  return call("rsqrt", {x});
}
Tensor tanh(const Tensor& x) {
  return call("tanh", {x});
}
Tensor sigmoid(const Tensor& x) {
  return call("sigmoid", {x});
}
Tensor silu(const Tensor& x) {
  return call("silu", {x});
}
Tensor gelu(const Tensor& x, const std::string& approximate) {
  return call("gelu", {x}, {{"approximate", approximate}});
}
Tensor pow_scalar(const Tensor& x, double exponent) {
  return call("pow_scalar", {x}, {{"exponent", exponent}});
}
Tensor add_scalar(const Tensor& x, double scalar) {
  return call("add_scalar", {x}, {{"scalar", scalar}});
}
Tensor mul_scalar(const Tensor& x, double scalar) {
  return call("mul_scalar", {x}, {{"scalar", scalar}});
}
Tensor softcap(const Tensor& x, double cap) {
  return call("softcap", {x}, {{"cap", cap}});
}

Tensor add(const Tensor& a, const Tensor& b) {
  return call("add", {a, b});
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return call("sub", {a, b});
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return call("mul", {a, b});
}
Tensor div(const Tensor& a, const Tensor& b) {
  return call("div", {a, b});
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return call("maximum", {a, b});
}
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  return call("where", {condition, a, b});
}
Tensor cast(const Tensor& x, DType dtype) {
  return call("cast", {x}, {{"dtype", dtype}});
}

Tensor sum(const Tensor& x, bool keepdim) {
  return call("sum", {x}, {{"keepdim", keepdim}});
}
Tensor mean(const Tensor& x, bool keepdim) {
  return call("mean", {x}, {{"keepdim", keepdim}});
}
Tensor max(const Tensor& x, bool keepdim) {
  return call("max", {x}, {{"keepdim", keepdim}});
}
Tensor argmax(const Tensor& x, bool keepdim) {
  return call("argmax", {x}, {{"keepdim", keepdim}});
}
Tensor softmax(const Tensor& x) {
  return call("softmax", {x});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  return call("matmul", {a, b});
}
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  return bias ? call("linear", {x, weight, *bias}) : call("linear", {x, weight});
}
Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                  const std::string& activation, const std::optional<Tensor>& input_scale) {
  const Attributes attributes{{"activation", activation}};
  return input_scale ? call("fp8_linear", {x, weight, weight_scale, *input_scale}, attributes)
                     : call("fp8_linear", {x, weight, weight_scale}, attributes);
}
Tensor embedding(const Tensor& weight, const Tensor& ids) {
  return call("embedding", {weight, ids});
}
Tensor embedding_shard(const Tensor& weight, const Tensor& ids, int64_t vocab_start) {
  TESSERA_REQUIRE(vocab_start >= 0, "embedding_shard: vocab_start must be >= 0, got {}",
                  vocab_start);
  return call("embedding", {weight, ids}, {{"vocab_start", vocab_start}});
}
Tensor all_reduce(const Tensor& x) {
  return call("all_reduce", {x});
}
Tensor all_gather(const Tensor& x, int64_t world_size) {
  return call("all_gather", {x}, {{"world_size", world_size}});
}

Tensor view(const Tensor& x, std::vector<int64_t> shape) {
  return call("view", {x}, {{"shape", std::move(shape)}});
}
Tensor reshape(const Tensor& x, std::vector<int64_t> shape) {
  return call("reshape", {x}, {{"shape", std::move(shape)}});
}
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return call("slice", {x}, {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  return call("transpose", {x}, {{"dim0", dim0}, {"dim1", dim1}});
}
Tensor contiguous(const Tensor& x) {
  return call("contiguous", {x});
}
Tensor cat(std::span<const Tensor> tensors, int64_t dim) {
  static const OpDef& op = OpRegistry::global().get("cat");
  return call_op(op, tensors, {{"dim", dim}}).at(0);
}

Tensor moe_routing(const Tensor& router_logits, int64_t top_k, bool renormalize) {
  return call("moe_routing", {router_logits}, {{"top_k", top_k}, {"renormalize", renormalize}});
}
Tensor fused_moe(const Tensor& x, const Tensor& router_logits, const Tensor& gate_up_weights,
                 const Tensor& down_weights, int64_t top_k, bool renormalize,
                 int64_t first_expert) {
  return call("fused_moe", {x, router_logits, gate_up_weights, down_weights},
              {{"top_k", top_k}, {"renormalize", renormalize}, {"first_expert", first_expert}});
}
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return call("rms_norm", {x, weight}, {{"eps", eps}});
}
std::pair<Tensor, Tensor> fused_add_rms_norm(const Tensor& x, const Tensor& residual,
                                             const Tensor& weight, double eps) {
  static const OpDef& op = OpRegistry::global().get("fused_add_rms_norm");
  std::vector<Tensor> inputs{x, residual, weight};
  std::vector<Tensor> outputs = call_op(op, inputs, {{"eps", eps}});
  return {outputs.at(0), outputs.at(1)};
}
std::pair<Tensor, Tensor> rotary_embedding(const Tensor& positions, const Tensor& query,
                                           const Tensor& key, const Tensor& cos_sin_cache,
                                           int64_t head_size, bool is_neox) {
  static const OpDef& op = OpRegistry::global().get("rotary_embedding");
  std::vector<Tensor> inputs{positions, query, key, cos_sin_cache};
  std::vector<Tensor> outputs =
      call_op(op, inputs, {{"head_size", head_size}, {"is_neox", is_neox}});
  return {outputs.at(0), outputs.at(1)};
}
Tensor silu_and_mul(const Tensor& x) {
  return call("silu_and_mul", {x});
}
Tensor attention(const Tensor& query, const Tensor& key, const Tensor& value, int64_t layer,
                 int64_t num_heads, int64_t num_kv_heads, int64_t head_size, double scale,
                 int64_t sliding_window, double logit_softcap) {
  return call("attention", {query, key, value},
              {{"layer", layer},
               {"num_heads", num_heads},
               {"num_kv_heads", num_kv_heads},
               {"head_size", head_size},
               {"scale", scale},
               {"sliding_window", sliding_window},
               {"logit_softcap", logit_softcap}});
}
Tensor gelu_and_mul(const Tensor& x, const std::string& approximate) {
  return call("gelu_and_mul", {x}, {{"approximate", approximate}});
}

}  // namespace tessera::ops
