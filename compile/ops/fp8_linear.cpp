// fp8_linear: x @ weight^T with an FP8 (e4m3) weight and its f32 scales, x quantized to e4m3 as
// the step runs (kernels/quant/fp8_scaling.h has the arithmetic). The weight's scales are per
// output channel [N] or per 128 x 128 block [ceil(N/128), ceil(K/128)]; attribute "activation"
// picks x's scales: token, group (per token and 128 columns) or fixed (input_scale [1]).
#include "compile/ops/meta_helpers.h"
#include "kernels/quant/fp8_scaling.h"
#include "runtime/check.h"

namespace tessera {
namespace {

int64_t ceil_blocks(int64_t size) {
  return (size + kFp8Block - 1) / kFp8Block;
}

// weight_scale's shape against the weight's [N, K] (weights have constant shapes).
void require_weight_scale_shape(const MetaArgs& args) {
  const SymShape& weight = args.input(1).shape;
  const SymShape& scale = args.input(2).shape;
  if (!weight[0].is_constant() || !weight[1].is_constant())
    throw_argument_error(args, 1, "must have a constant shape");
  const int64_t n = weight[0].constant(), k = weight[1].constant();
  const bool per_channel = scale.size() == 1 && scale[0].is_constant() && scale[0].constant() == n;
  const bool per_block = scale.size() == 2 && scale[0].is_constant() && scale[1].is_constant() &&
                         scale[0].constant() == ceil_blocks(n) &&
                         scale[1].constant() == ceil_blocks(k);
  if (!per_channel && !per_block) {
    throw_argument_error(
        args, 2,
        fmt::format("must be per output channel [{}] or per {} x {} block [{}, "
                    "{}] for the weight {}",
                    n, kFp8Block, kFp8Block, ceil_blocks(n), ceil_blocks(k), args.input(1).str()));
  }
}

OpDef fp8_linear_op() {
  OpDef op;
  op.name = "fp8_linear";
  op.kind = OpKind::library;
  op.input_names = {"x", "weight", "weight_scale", "input_scale"};
  op.optional_inputs = {"input_scale"};
  op.attributes = {{"activation", std::string("token")}};
  op.streamed_weight = 1;
  op.doc =
      "x [..., K] @ (weight [N, K] f8_e4m3 * weight_scale)^T -> [..., N] in x's dtype; "
      "weight_scale f32 [N] or [ceil(N/128), ceil(K/128)]; x quantized to e4m3 per token "
      "(activation=token), per token and 128 columns (group), or by input_scale f32 [1] (fixed)";
  op.meta = [](const MetaArgs& args) {
    require_float(args, 0);
    require_dtype_in(args, 1, {DType::f8_e4m3});
    require_dtype_in(args, 2, {DType::f32});
    require_rank_at_least(args, 0, 1);
    require_rank(args, 1, 2);
    const SymShape& x = args.input(0).shape;
    const SymShape& weight = args.input(1).shape;
    if (!sizes_equal(x.back(), weight[1], "the input size K")) {
      throw_argument_error(args, 1,
                           fmt::format("must have x's last size {} as its columns ({})",
                                       x.back().str(), args.input(0).str()));
    }
    require_weight_scale_shape(args);
    const Fp8ActivationScale activation =
        parse_fp8_activation_scale(args.attributes.get_string("activation"));
    const bool fixed = activation == Fp8ActivationScale::fixed;
    if (fixed != (args.inputs.size() == 4)) {
      throw Error(fmt::format("{}: activation={} {} input_scale", args.op.name,
                              fp8_activation_scale_name(activation), fixed ? "needs" : "takes no"));
    }
    if (fixed) {
      require_dtype_in(args, 3, {DType::f32});
      require_rank(args, 3, 1);
      if (!sizes_equal(args.input(3).shape[0], 1, "input_scale size"))
        throw_argument_error(args, 3, "must hold one scale, [1]");
    }
    TensorMeta out = args.input(0);
    out.shape.back() = weight[0];
    return std::vector<TensorMeta>{out};
  };
  return op;
}

TESSERA_REGISTER_OP(fp8_linear_op());

}  // namespace
}  // namespace tessera
