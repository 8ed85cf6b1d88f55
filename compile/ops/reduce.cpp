// Reductions over the last dim (sum, mean, max, argmax) and softmax.
#include "compile/codegen/row_lowering.h"
#include "compile/ops/meta_helpers.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// A row kernel reduces each row's last dim in one loop: it needs the rows and a known length.
bool accepts_last_dim_reduction(const RowCandidate& candidate) {
  const TensorMeta& in = candidate.inputs[0];
  return in.rank() >= 2 && candidate.input_has_rows(0) && in.shape.back().is_constant();
}

std::string same(const std::string& element) {
  return element;
}

// sum, mean, max: one reduction of the input, read at the output's groups.
RowLowering reduction_lowering(bool is_max, bool is_mean) {
  return {accepts_last_dim_reduction, [is_max, is_mean](RowEmitter& emitter) {
            double length = static_cast<double>(emitter.input_meta(0).shape.back().constant());
            std::string array = emitter.reduction(0, 0, is_max, is_mean ? 1.0 / length : 1.0, same);
            return emitter.read_reduction(array, 0, emitter.index());
          }};
}

// exp(x - max) / sum(exp(x - max)): a max, then a sum that reads it.
RowLowering softmax_lowering() {
  return {accepts_last_dim_reduction, [](RowEmitter& emitter) {
            std::string maximum = emitter.reduction(0, 0, true, 1.0, same);
            std::string total =
                emitter.reduction(1, 0, false, 1.0, [&maximum](const std::string& element) {
                  return fmt::format("expf({} - {}[g])", element, maximum);
                });
            const Index& index = emitter.index();
            return fmt::format("(expf({} - {}) / {})", emitter.value(0, index),
                               emitter.read_reduction(maximum, 0, index),
                               emitter.read_reduction(total, 0, index));
          }};
}

OpDef reduction_op(const std::string& name, bool index_output, const std::string& doc,
                   RowLowering row_lowering = {}) {
  OpDef op;
  op.name = name;
  op.kind = OpKind::reduction;
  op.row_lowering = std::move(row_lowering);
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
  op.kind = OpKind::reduction;
  op.row_lowering = softmax_lowering();
  op.input_names = {"x"};
  op.doc = "softmax over the last dim";
  op.meta = [](const MetaArgs& args) {
    require_float(args, 0);
    require_rank_at_least(args, 0, 1);
    return std::vector<TensorMeta>{args.input(0)};
  };
  return op;
}

TESSERA_REGISTER_OP(reduction_op("sum", false, "sum over the last dim",
                                 reduction_lowering(false, false)));
TESSERA_REGISTER_OP(reduction_op("mean", false, "mean over the last dim",
                                 reduction_lowering(false, true)));
TESSERA_REGISTER_OP(reduction_op("max", false, "maximum over the last dim",
                                 reduction_lowering(true, false)));
// No row lowering: an index result is not a float reduction, so argmax is never fused.
TESSERA_REGISTER_OP(reduction_op("argmax", true, "index of the first maximum over the last dim"));
TESSERA_REGISTER_OP(softmax_op());

}  // namespace
}  // namespace tessera
