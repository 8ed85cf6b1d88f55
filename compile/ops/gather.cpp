// Gathers and joins: embedding (rows by id) and cat.
#include "compile/codegen/row_lowering.h"
#include "compile/ops/meta_helpers.h"

#include "runtime/check.h"

namespace tessera {
namespace {

// A weight row per output row: ids [rows], read as an integer; the weight is a constant, so it
// is a kernel input.
RowLowering embedding_lowering() {
  RowLowering lowering;
  lowering.accepts = [](const RowCandidate& candidate) {
    // A table shard (vocab_start >= 0) runs its kernel: it happens once per forward.
    // A quantized table is read by its kernel: the row kernels load plain elements.
    return !is_quantized(candidate.inputs[0].dtype) &&
           candidate.attributes.get_int("vocab_start") < 0 && candidate.inputs[1].rank() == 1 &&
           candidate.input_has_rows(1) && candidate.constant_inputs[0];
  };
  lowering.emit = [](RowEmitter& emitter) {
    const Index& index = emitter.index();
    int64_t width = emitter.input_meta(0).shape[1].constant();
    IndexExpr row = emitter.integer(1, Index{index[0]});
    IndexExpr offset{fmt::format("{} * {} + ({})", row.text, width, index[1].text),
                     plus(times(row.form, width), index[1].form)};
    return emitter.load(0, offset);
  };
  return lowering;
}

// Along any dim but the rows: a branch per input, chosen by the index along `dim`.
RowLowering cat_lowering() {
  RowLowering lowering;
  lowering.accepts = [](const RowCandidate& candidate) {
    if (candidate.attributes.get_int("dim") == 0) return false;
    for (size_t i = 0; i < candidate.inputs.size(); ++i)
      if (!candidate.input_has_rows(i)) return false;
    return candidate.float_inputs();
  };
  lowering.emit = [](RowEmitter& emitter) {
    const Index& index = emitter.index();
    const size_t count = emitter.num_inputs();
    int64_t dim = emitter.attributes().get_int("dim");
    // A lane past an input's part of the cat reads it out of range in the branch it does not
    // take: with several inputs, no branch is read by every lane.
    if (count > 1) emitter.begin_branches();
    std::string result;
    int64_t start = 0;
    for (size_t i = 0; i < count; ++i) {
      int64_t size = emitter.input_meta(i).shape[dim].constant();
      Index shifted = index;
      shifted[dim] = shifted_index(index[dim], -start);
      std::string value = emitter.value(i, shifted);
      result += i + 1 == count
                    ? value
                    : fmt::format("({} < {} ? {} : ", index[dim].text, start + size, value);
      start += size;
    }
    if (count > 1) emitter.end_branches();
    return result + std::string(count - 1, ')');
  };
  return lowering;
}

OpDef embedding_op() {
  OpDef op;
  op.name = "embedding";
  op.kind = OpKind::gather;
  op.row_lowering = embedding_lowering();
  op.input_names = {"weight", "ids"};
  // -1: the whole table (an id outside it is an error on the CPU); >= 0: the weight holds rows
  // [vocab_start, vocab_start + V) of a larger table and other ids give zero rows.
  op.attributes = {{"vocab_start", int64_t{-1}}};
  op.doc =
      "weight [V, D] rows gathered by ids (i32/i64) [...] -> [..., D]; with vocab_start >= 0 the "
      "weight is rows [vocab_start, vocab_start + V) of a larger table, other ids give zeros; a "
      "quantized table gives its rows dequantized, in f32";
  op.meta = [](const MetaArgs& args) {
    require_rank(args, 0, 2);
    require_dtype_in(args, 1, {DType::i32, DType::i64});
    TensorMeta out = args.input(0);
    if (is_quantized(out.dtype)) {
      require_whole_blocks(args, 0);
      out.dtype = DType::f32;  // rows are dequantized
    }
    out.shape = args.input(1).shape;
    out.shape.push_back(args.input(0).shape[1]);
    return std::vector<TensorMeta>{out};
  };
  return op;
}

OpDef cat_op() {
  OpDef op;
  op.name = "cat";
  op.kind = OpKind::gather;
  op.row_lowering = cat_lowering();
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
