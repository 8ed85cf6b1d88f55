// Reductions over the last dim (sum, mean, max, argmax) and softmax.
#include "compile/ops/meta_helpers.h"

namespace tessera {
namespace {

OpDef reduction_op(const std::string& name, bool index_output, const std::string& doc) {
  OpDef op;
  op.name = name;
  op.input_names = {"x"};
  op.attributes = {{"keepdim", false}};
  op.doc = doc;
  op.meta = [index_output](const MetaArgs& args) {
    require_float(args, 0);
    require_rank_at_least(args, 0, 1);
    TensorMeta out = args.input(0);
    if (!(out.shape.back() > SymInt(0)).guard_bool("reduction over an empty dim")) {
      throw_argument_error(args, 0, "has an empty last dim; there is nothing to reduce");
    }
    if (args.attributes.get_bool("keepdim", false))
      out.shape.back() = SymInt(1);
    else
      out.shape.pop_back();
    if (index_output) out.dtype = DType::i64;
    return std::vector<TensorMeta>{out};
  };
  return op;
}

OpDef softmax_op() {
  OpDef op;
  op.name = "softmax";
  op.input_names = {"x"};
  op.doc = "softmax over the last dim";
  op.meta = [](const MetaArgs& args) {
    require_float(args, 0);
    require_rank_at_least(args, 0, 1);
    return std::vector<TensorMeta>{args.input(0)};
  };
  return op;
}

TESSERA_REGISTER_OP(reduction_op("sum", false, "sum over the last dim"));
TESSERA_REGISTER_OP(reduction_op("mean", false, "mean over the last dim"));
TESSERA_REGISTER_OP(reduction_op("max", false, "maximum over the last dim"));
TESSERA_REGISTER_OP(reduction_op("argmax", true, "index of the first maximum over the last dim"));
TESSERA_REGISTER_OP(softmax_op());

}  // namespace
}  // namespace tessera
