// Matrix products: matmul and linear (x @ weight^T + bias). Library GEMMs on every device.
#include "compile/ops/meta_helpers.h"

#include "runtime/check.h"

namespace tessera {
namespace {

void require_inner_sizes_match(const MetaArgs& args, const SymInt& left, const SymInt& right,
                               const char* what) {
  if (!sizes_equal(left, right, what)) {
    throw Error(fmt::format("{}: {} of argument '{}' ({}) is {} but of argument '{}' ({}) is {}",
                            args.op.name, what, args.input_name(0), args.input(0).str(), left.str(),
                            args.input_name(1), args.input(1).str(), right.str()));
  }
}

OpDef matmul_op() {
  OpDef op;
  op.name = "matmul";
  op.kind = OpKind::library;
  op.input_names = {"a", "b"};
  op.doc = "a [..., M, K] @ b [K, N] or b [..., K, N] -> [..., M, N]";
  op.meta = [](const MetaArgs& args) {
    require_float(args, 0);
    require_same_dtype(args, 0, 1);
    require_rank_at_least(args, 0, 2);
    require_rank_at_least(args, 1, 2);
    const SymShape& a = args.input(0).shape;
    const SymShape& b = args.input(1).shape;
    require_inner_sizes_match(args, a.back(), b[b.size() - 2], "the contracted size K");
    if (b.size() > 2) {
      if (b.size() != a.size()) {
        throw Error(
            fmt::format("{}: batched argument 'b' ({}) must have the rank of 'a' ({}) or "
                        "be 2-D",
                        args.op.name, args.input(1).str(), args.input(0).str()));
      }
      for (size_t i = 0; i + 2 < a.size(); ++i)
        require_inner_sizes_match(args, a[i], b[i], "a batch size");
    }
    TensorMeta out = args.input(0);
    out.shape.back() = b.back();
    return std::vector<TensorMeta>{out};
  };
  return op;
}

OpDef linear_op() {
  OpDef op;
  op.name = "linear";
  op.kind = OpKind::library;
  op.input_names = {"x", "weight", "bias"};
  op.optional_inputs = {"bias"};
  op.streamed_weight = 1;
  op.doc =
      "x [..., K] @ weight[N, K]^T + bias [N] -> [..., N]; a quantized weight (q8_0, q4_k, ...) "
      "holds whole blocks along K and gives x's dtype";
  op.meta = [](const MetaArgs& args) {
    require_float(args, 0);
    const bool quantized = is_quantized(args.input(1).dtype);
    if (!quantized) require_same_dtype(args, 0, 1);
    require_rank_at_least(args, 0, 1);
    require_rank(args, 1, 2);
    const SymShape& x = args.input(0).shape;
    const SymShape& weight = args.input(1).shape;
    require_inner_sizes_match(args, x.back(), weight[1], "the input size K");
    if (quantized) require_whole_blocks(args, 1);
    if (args.inputs.size() == 3) {
      require_same_dtype(args, 0, 2);
      require_rank(args, 2, 1);
      if (!sizes_equal(args.input(2).shape[0], weight[0], "bias size")) {
        throw_argument_error(args, 2,
                             fmt::format("must have the output size {} of 'weight' ({})",
                                         weight[0].str(), args.input(1).str()));
      }
    }
    TensorMeta out = args.input(0);
    out.shape.back() = weight[0];
    return std::vector<TensorMeta>{out};
  };
  return op;
}

TESSERA_REGISTER_OP(matmul_op());
TESSERA_REGISTER_OP(linear_op());

}  // namespace
}  // namespace tessera
