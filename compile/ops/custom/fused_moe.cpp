// moe_routing and fused_moe: a mixture-of-experts MLP (Mixtral, Qwen3-MoE). moe_routing turns
// router logits into each token's expert weights: a softmax over all experts (in f32), the top_k
// kept (the lowest index first among equal values), renormalized over those when asked, zero
// elsewhere. fused_moe runs the chosen experts' SwiGLU MLPs and sums them with those weights.
//
// fused_moe is a library custom op inside a piece (not a splitting op). Its decomposition runs
// every expert on every token and weights each by its routing column (zero for the experts not
// chosen): exact, and made of ops every device has, but num_experts times the work, so compiled
// mode keeps the op unless custom_ops names it ("-fused_moe") or lists "none".
#include "compile/ops/meta_helpers.h"
#include "compile/ops/ops.h"
#include "compile/trace/fake_tensor.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// The number of experts and top_k in range: 1 <= top_k <= experts.
void check_top_k(const MetaArgs& args, size_t logits_index) {
  const SymInt& experts = args.input(logits_index).shape.back();
  const int64_t top_k = args.attributes.get_int("top_k");
  if (!experts.is_constant())
    throw_argument_error(args, logits_index, "needs a constant number of experts (its last size)");
  if (top_k < 1 || top_k > experts.constant())
    throw_argument_error(
        args, logits_index,
        fmt::format("top_k {} must be between 1 and the {} experts", top_k, experts.constant()));
}

OpDef moe_routing_op() {
  OpDef op;
  op.name = "moe_routing";
  op.kind = OpKind::library;
  op.input_names = {"router_logits"};
  op.attributes = {{"top_k", std::nullopt}, {"renormalize", false}};
  op.doc =
      "router_logits [T, E] -> f32 [T, E]: softmax over the experts, the top_k kept "
      "(renormalized to sum 1 when renormalize), zero elsewhere";
  op.meta = [](const MetaArgs& args) {
    require_float(args, 0);
    require_rank(args, 0, 2);
    check_top_k(args, 0);
    TensorMeta out = args.input(0);
    out.dtype = DType::f32;
    return std::vector<TensorMeta>{out};
  };
  return op;
}

OpDef fused_moe_op() {
  OpDef op;
  op.name = "fused_moe";
  op.kind = OpKind::library;
  op.input_names = {"x", "router_logits", "gate_up_weights", "down_weights"};
  op.attributes = {{"top_k", std::nullopt}, {"renormalize", false}, {"first_expert", int64_t{0}}};
  op.custom = true;
  op.kept_when_compiled = true;
  op.doc =
      "x [T, H], router_logits [T, E], gate_up_weights [L, 2I, H], down_weights [L, H, I] for "
      "experts first_expert .. first_expert + L - 1 -> [T, H]: sum over those of the top_k "
      "experts e of moe_routing's weight times down_e(silu(gate_e x) * up_e x); each weight "
      "stack is x's dtype or a quantized block format (q8_0, q4_k, ...)";
  op.meta = [](const MetaArgs& args) {
    require_float(args, 0);
    require_rank(args, 0, 2);
    require_float(args, 1);
    require_rank(args, 1, 2);
    check_top_k(args, 1);
    // Each stack of weights is x's dtype or one GGUF block format (whole blocks along its rows).
    for (size_t weights : {size_t{2}, size_t{3}}) {
      require_rank(args, weights, 3);
      if (is_quantized(args.input(weights).dtype))
        require_whole_blocks(args, weights);
      else
        require_same_dtype(args, 0, weights);
    }
    const TensorMeta& x = args.input(0);
    const SymShape& gate_up = args.input(2).shape;
    const SymShape& down = args.input(3).shape;
    auto require = [&](bool holds, size_t index, const std::string& why) {
      if (!holds) throw_argument_error(args, index, why);
    };
    require(sizes_equal(args.input(1).shape[0], x.shape[0], "router rows"), 1,
            fmt::format("must have a row per token of 'x' ({})", x.str()));
    // The weights' experts, from first_expert on, lie within the router's.
    const int64_t first_expert = args.attributes.get_int("first_expert", 0);
    const SymInt& experts = gate_up[0];
    const int64_t router_experts = args.input(1).shape[1].constant();
    if (!experts.is_constant() || experts.constant() < 1 || first_expert < 0 ||
        first_expert > router_experts - experts.constant())
      throw_argument_error(
          args, 2,
          fmt::format("must hold at least one expert, first_expert ({}) on, within the {} router "
                      "logits",
                      first_expert, router_experts));
    require(sizes_equal(gate_up[2], x.shape[1], "gate_up width"), 2,
            fmt::format("must have the hidden size of 'x' ({}) last", x.str()));
    require(sizes_equal(mod(gate_up[1], 2), 0, "gate_up parity"), 2,
            "must stack gate and up rows (an even middle size)");
    require(sizes_equal(down[0], experts, "down experts"), 3,
            "must have the experts of 'gate_up_weights' (its first size)");
    require(sizes_equal(down[1], x.shape[1], "down rows"), 3,
            fmt::format("must have the hidden size of 'x' ({}) in the middle", x.str()));
    require(sizes_equal(down[2], floordiv(gate_up[1], 2), "down width"), 3,
            "must have the intermediate size (half of gate_up_weights' middle size) last");
    return std::vector<TensorMeta>{x};
  };
  op.decompose = [](std::span<const Tensor> inputs, const Attributes& attributes) {
    const Tensor& x = inputs[0];
    const Tensor& gate_up = inputs[2];
    const Tensor& down = inputs[3];
    const Tensor routing = ops::cast(ops::moe_routing(inputs[1], attributes.get_int("top_k"),
                                                      attributes.get_bool("renormalize", false)),
                                     x.dtype());
    const int64_t experts = sym_size(gate_up, 0).guard_int("experts");
    const int64_t first_expert = attributes.get_int("first_expert", 0);
    const int64_t hidden = sym_size(gate_up, 2).guard_int("hidden size");
    const int64_t gate_up_rows = sym_size(gate_up, 1).guard_int("gate_up rows");
    Tensor out;
    for (int64_t e = 0; e < experts; ++e) {
      Tensor gate_up_weight =
          ops::reshape(ops::slice(gate_up, 0, e, e + 1), {gate_up_rows, hidden});
      Tensor down_weight = ops::reshape(ops::slice(down, 0, e, e + 1), {hidden, gate_up_rows / 2});
      Tensor expert = ops::linear(ops::silu_and_mul(ops::linear(x, gate_up_weight)), down_weight);
      Tensor weighted =
          ops::mul(expert, ops::slice(routing, 1, first_expert + e, first_expert + e + 1));
      out = e == 0 ? weighted : ops::add(out, weighted);
    }
    return std::vector<Tensor>{out};
  };
  return op;
}

TESSERA_REGISTER_OP(moe_routing_op());
TESSERA_REGISTER_OP(fused_moe_op());

}  // namespace
}  // namespace tessera
