// silu_and_mul_linear and gelu_and_mul_linear: the gated MLP's activation and its down projection
// as one op, linear(act(x[..., :d]) * x[..., d:], weight, bias). Model code never calls them: the
// linear-prologue pass (compile/passes/linear_prologue.cpp) puts them where a gated activation
// feeds a linear, so that a GPU can compute the activation while it reads the linear's input
// (kernels/cuda/gemm/skinny_gemm.h) instead of in a launch of its own. The second output is the
// activation itself, as silu_and_mul computes it (f32, rounded once): the kernels always write it,
// and a path that runs the two steps apart needs it as the linear's input.
#include "compile/ops/meta_helpers.h"
#include "compile/ops/ops.h"
#include "compile/trace/dispatch.h"
#include "compile/trace/fake_tensor.h"
#include "runtime/check.h"

namespace tessera {
namespace {

OpDef activation_and_mul_linear_op(const std::string& activation,
                                   std::vector<AttributeSpec> attributes) {
  OpDef op;
  op.name = activation + "_and_mul_linear";
  op.kind = OpKind::library;
  op.input_names = {"x", "weight", "bias"};
  op.optional_inputs = {"bias"};
  op.streamed_weight = 1;
  op.attributes = std::move(attributes);
  op.doc = "linear(" + activation +
           "(x[..., :d]) * x[..., d:], weight [N, d], bias [N]) -> ([..., N], the activation "
           "[..., d])";
  op.meta = [](const MetaArgs& args) {
    require_float(args, 0);
    require_same_dtype(args, 0, 1);
    require_rank_at_least(args, 0, 1);
    require_rank(args, 1, 2);
    TensorMeta activated = args.input(0);
    const SymInt& width = activated.shape.back();
    if (!sizes_equal(mod(width, 2), 0, "gated width parity"))
      throw_argument_error(args, 0, "must have an even last size (gate and up halves)");
    activated.shape.back() = floordiv(width, 2);
    const SymShape& weight = args.input(1).shape;
    if (!sizes_equal(activated.shape.back(), weight[1], "the input size K"))
      throw_argument_error(args, 1,
                           fmt::format("must have {} columns, half of x's last size ({})",
                                       activated.shape.back().str(), args.input(0).str()));
    if (args.inputs.size() == 3) {
      require_same_dtype(args, 0, 2);
      require_rank(args, 2, 1);
      if (!sizes_equal(args.input(2).shape[0], weight[0], "bias size"))
        throw_argument_error(args, 2,
                             fmt::format("must have the output size {} of 'weight' ({})",
                                         weight[0].str(), args.input(1).str()));
    }
    TensorMeta out = activated;
    out.shape.back() = weight[0];
    return std::vector<TensorMeta>{out, activated};
  };
  op.decompose = [activation](std::span<const Tensor> inputs, const Attributes& attributes) {
    Tensor activated = call_op(activation + "_and_mul", std::span(inputs.data(), 1), attributes)[0];
    std::optional<Tensor> bias;
    if (inputs.size() == 3) bias = inputs[2];
    return std::vector<Tensor>{ops::linear(activated, inputs[1], bias), activated};
  };
  return op;
}

TESSERA_REGISTER_OP(activation_and_mul_linear_op("silu", {}));
TESSERA_REGISTER_OP(activation_and_mul_linear_op("gelu", {{"approximate", std::string("none")}}));

}  // namespace
}  // namespace tessera
