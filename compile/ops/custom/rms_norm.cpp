// rms_norm and fused_add_rms_norm (residual add + norm): custom ops with their own kernels and a
// native decomposition computed in f32, as vLLM's forward_native does.
#include "compile/ops/meta_helpers.h"
#include "compile/ops/ops.h"
#include "runtime/check.h"

namespace tessera {
namespace {

void check_norm_weight(const MetaArgs& args, size_t x_index, size_t weight_index) {
  require_float(args, x_index);
  require_same_dtype(args, x_index, weight_index);
  require_rank_at_least(args, x_index, 1);
  require_rank(args, weight_index, 1);
  if (!sizes_equal(args.input(weight_index).shape[0], args.input(x_index).shape.back(),
                   "norm weight size")) {
    throw_argument_error(args, weight_index,
                         fmt::format("must have the last size of '{}' ({})",
                                     args.input_name(x_index), args.input(x_index).str()));
  }
}

// x (f32) normalized by its root mean square, cast back to `dtype`, times weight.
Tensor normalize_f32(const Tensor& x_f32, const Tensor& weight, double eps, DType dtype) {
  Tensor variance = ops::mean(ops::mul(x_f32, x_f32), /*keepdim=*/true);
  Tensor normalized = ops::mul(x_f32, ops::rsqrt(ops::add_scalar(variance, eps)));
  return ops::mul(ops::cast(normalized, dtype), weight);
}

OpDef rms_norm_op() {
  OpDef op;
  op.name = "rms_norm";
  op.kind = OpKind::library;
  op.input_names = {"x", "weight"};
  op.attributes = {{"eps", 1e-6}};
  op.custom = true;
  op.doc = "x / sqrt(mean(x^2, -1) + eps) * weight";
  op.meta = [](const MetaArgs& args) {
    check_norm_weight(args, 0, 1);
    return std::vector<TensorMeta>{args.input(0)};
  };
  op.decompose = [](std::span<const Tensor> inputs, const Attributes& attributes) {
    const Tensor& x = inputs[0];
    return std::vector<Tensor>{
        normalize_f32(ops::cast(x, DType::f32), inputs[1], attributes.get_float("eps"), x.dtype())};
  };
  return op;
}

OpDef fused_add_rms_norm_op() {
  OpDef op;
  op.name = "fused_add_rms_norm";
  op.kind = OpKind::library;
  op.input_names = {"x", "residual", "weight"};
  op.attributes = {{"eps", 1e-6}};
  op.custom = true;
  op.doc = "residual_out = x + residual; out = rms_norm(residual_out) (two outputs)";
  op.meta = [](const MetaArgs& args) {
    check_norm_weight(args, 0, 2);
    require_same_dtype(args, 0, 1);
    const SymShape& x = args.input(0).shape;
    const SymShape& residual = args.input(1).shape;
    bool same = x.size() == residual.size();
    for (size_t i = 0; same && i < x.size(); ++i)
      same = sizes_equal(x[i], residual[i], "residual shape");
    if (!same)
      throw_argument_error(args, 1,
                           fmt::format("must have the shape of 'x' ({})", args.input(0).str()));
    return std::vector<TensorMeta>{args.input(0), args.input(0)};
  };
  op.decompose = [](std::span<const Tensor> inputs, const Attributes& attributes) {
    DType dtype = inputs[0].dtype();
    Tensor sum = ops::add(ops::cast(inputs[0], DType::f32), ops::cast(inputs[1], DType::f32));
    return std::vector<Tensor>{normalize_f32(sum, inputs[2], attributes.get_float("eps"), dtype),
                               ops::cast(sum, dtype)};
  };
  return op;
}

TESSERA_REGISTER_OP(rms_norm_op());
TESSERA_REGISTER_OP(fused_add_rms_norm_op());

}  // namespace
}  // namespace tessera
