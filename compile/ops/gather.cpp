// Gathers and joins: embedding (rows by id) and cat.
#include "compile/ops/meta_helpers.h"

#include "kernels/check.h"

namespace tessera {
namespace {

OpDef embedding_op() {
  OpDef op;
  op.name = "embedding";
  op.input_names = {"weight", "ids"};
  op.doc = "weight [V, D] rows gathered by ids (i32/i64) [...] -> [..., D]";
  op.meta = [](const MetaArgs& args) {
    require_rank(args, 0, 2);
    require_dtype_in(args, 1, {DType::i32, DType::i64});
    TensorMeta out = args.input(0);
    out.shape = args.input(1).shape;
    out.shape.push_back(args.input(0).shape[1]);
    return std::vector<TensorMeta>{out};
  };
  return op;
}

OpDef cat_op() {
  OpDef op;
  op.name = "cat";
  op.input_names = {"tensors"};
  op.variadic = true;
  op.min_inputs = 1;
  op.attributes = {{"dim", std::nullopt}};
  op.doc = "joins tensors along dim";
  op.canonicalize = wrap_dim_attributes({"dim"});
  op.meta = [](const MetaArgs& args) {
    const TensorMeta& first = args.input(0);
    int64_t dim = wrap_dim_for(args, args.attributes.get_int("dim"), first.rank());
    TensorMeta out = first;
    for (size_t i = 1; i < args.inputs.size(); ++i) {
      require_same_dtype(args, 0, i);
      const TensorMeta& other = args.input(i);
      if (other.rank() != first.rank()) {
        throw Error(fmt::format("{}: argument '{}' ({}) has rank {} but '{}' ({}) has rank {}",
                                args.op.name, args.input_name(i), other.str(), other.rank(),
                                args.input_name(0), first.str(), first.rank()));
      }
      for (int64_t d = 0; d < first.rank(); ++d) {
        if (d == dim) continue;
        if (!sizes_equal(other.shape[d], first.shape[d], "cat size")) {
          throw Error(
              fmt::format("{}: argument '{}' ({}) differs from '{}' ({}) in dim {}, which "
                          "is not the cat dim {}",
                          args.op.name, args.input_name(i), other.str(), args.input_name(0),
                          first.str(), d, dim));
        }
      }
      out.shape[dim] = out.shape[dim] + other.shape[dim];
    }
    return std::vector<TensorMeta>{out};
  };
  return op;
}

TESSERA_REGISTER_OP(embedding_op());
TESSERA_REGISTER_OP(cat_op());

}  // namespace
}  // namespace tessera
