// silu_and_mul and gelu_and_mul: act(x[..., :d]) * x[..., d:] for the gated MLP.
#include "compile/ops/meta_helpers.h"
#include "compile/ops/ops.h"
#include "compile/trace/fake_tensor.h"
#include "runtime/check.h"

namespace tessera {
namespace {

OpDef activation_and_mul_op(const std::string& name, std::vector<AttributeSpec> attributes,
                            std::function<Tensor(const Tensor&, const Attributes&)> activation) {
  OpDef op;
  op.name = name;
  op.kind = OpKind::library;
  op.input_names = {"x"};
  op.attributes = std::move(attributes);
  op.custom = true;
  op.doc = "activation(x[..., :d]) * x[..., d:] for x [..., 2d]";
  op.meta = [](const MetaArgs& args) {
    require_float(args, 0);
    require_rank_at_least(args, 0, 1);
    TensorMeta out = args.input(0);
    const SymInt& width = out.shape.back();
    if (!sizes_equal(mod(width, 2), 0, "gated width parity"))
      throw_argument_error(args, 0, "must have an even last size (gate and up halves)");
    out.shape.back() = floordiv(width, 2);
    return std::vector<TensorMeta>{out};
  };
  op.decompose = [activation](std::span<const Tensor> inputs, const Attributes& attributes) {
    const Tensor& x = inputs[0];
    SymInt half = floordiv(sym_size(x, -1), 2);
    int64_t d = half.guard_int("gated MLP half width");
    Tensor gate = ops::slice(x, -1, 0, d);
    Tensor up = ops::slice(x, -1, d, 2 * d);
    return std::vector<Tensor>{ops::mul(activation(gate, attributes), up)};
  };
  return op;
}

TESSERA_REGISTER_OP(activation_and_mul_op("silu_and_mul", {},
                                          [](const Tensor& x, const Attributes&) {
                                            return ops::silu(x);
                                          }));
TESSERA_REGISTER_OP(activation_and_mul_op("gelu_and_mul", {{"approximate", std::string("none")}},
                                          [](const Tensor& x, const Attributes& attributes) {
                                            return ops::gelu(x,
                                                             attributes.get_string("approximate"));
                                          }));

}  // namespace
}  // namespace tessera
