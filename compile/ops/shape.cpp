// Shape ops: views over the same storage in eager mode (no kernel, device independent), graph
// nodes while tracing (the compiler turns most into index arithmetic).
#include <algorithm>
#include <limits>

#include "compile/codegen/row_lowering.h"
#include "compile/ops/meta_helpers.h"
#include "runtime/check.h"

namespace tessera {
namespace {

std::vector<Tensor> one(Tensor tensor) {
  return {std::move(tensor)};
}

bool same_shape(const SymShape& a, const SymShape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].same_as(b[i])) return false;
  return true;
}

bool same_shape_as_input(const IdentityQuery& query) {
  return same_shape(query.input.shape, query.output.shape);
}

// Inside a row kernel a view is index arithmetic; it must keep the rows where they are.
bool view_keeps_rows(const RowCandidate& candidate) {
  return candidate.input_has_rows(0) && candidate.float_inputs();
}

// reshape, view, contiguous: the element at the same row-major position of the row.
RowLowering reshape_lowering() {
  return {view_keeps_rows, [](RowEmitter& emitter) {
            const Index& index = emitter.index();
            std::vector<int64_t> out_inner = inner_shape(emitter.output_meta());
            std::vector<int64_t> in_inner = inner_shape(emitter.input_meta(0));
            Index source_index{index[0]};
            Index inner(index.begin() + 1, index.end());
            for (IndexExpr& part : unflatten(flatten(inner, out_inner), in_inner, emitter.lanes()))
              source_index.push_back(std::move(part));
            return emitter.value(0, source_index);
          }};
}

OpDef view_op(const std::string& name, bool copies_when_needed) {
  OpDef op;
  op.name = name;
  op.kind = OpKind::view;
  op.input_names = {"x"};
  op.attributes = {{"shape", std::nullopt}};
  op.is_identity = same_shape_as_input;
  op.row_lowering = reshape_lowering();
  op.doc = copies_when_needed ? "reshape; a view when the layout allows, else a copy"
                              : "view of a contiguous tensor with another shape";
  op.meta = [](const MetaArgs& args) {
    TensorMeta out = args.input(0);
    out.shape = infer_view_shape(args, args.input(0).shape, args.attributes.get_ints("shape"));
    return std::vector<TensorMeta>{out};
  };
  op.eager = [copies_when_needed, name](std::span<const Tensor> inputs,
                                        const Attributes& attributes) {
    const Tensor& x = inputs[0];
    TESSERA_REQUIRE(copies_when_needed || x.is_contiguous(),
                    "{}: argument 'x' ({}, strides {}) is not contiguous; use reshape or "
                    "contiguous first",
                    name, x.str(), shape_str(x.strides()));
    return one(x.contiguous().view(attributes.get_ints("shape")));
  };
  return op;
}

constexpr int64_t kSliceToEnd = std::numeric_limits<int64_t>::max();

OpDef slice_op() {
  OpDef op;
  op.name = "slice";
  op.kind = OpKind::view;
  op.is_identity = [](const IdentityQuery& query) {
    return query.attributes.get_int("step") == 1 && same_shape_as_input(query);
  };
  op.row_lowering.accepts = [](const RowCandidate& candidate) {
    return view_keeps_rows(candidate) && candidate.attributes.get_int("dim") != 0;
  };
  op.row_lowering.emit = [](RowEmitter& emitter) {
    Index source_index = emitter.index();
    int64_t dim = emitter.attributes().get_int("dim");
    int64_t start = emitter.attributes().get_int("start");
    if (start < 0) start += emitter.input_meta(0).shape[dim].constant();
    start = std::max<int64_t>(start, 0);
    source_index[dim] =
        strided_index(start, emitter.attributes().get_int("step"), source_index[dim]);
    return emitter.value(0, source_index);
  };
  op.input_names = {"x"};
  op.attributes = {
      {"dim", std::nullopt}, {"start", int64_t{0}}, {"end", kSliceToEnd}, {"step", int64_t{1}}};
  op.doc = "x[start:end:step] along dim (negative indices count from the end; end clamps)";
  op.canonicalize = wrap_dim_attributes({"dim"});
  op.meta = [](const MetaArgs& args) {
    const TensorMeta& x = args.input(0);
    int64_t dim = wrap_dim_for(args, args.attributes.get_int("dim"), x.rank());
    int64_t start = args.attributes.get_int("start");
    int64_t end = args.attributes.get_int("end");
    int64_t step = args.attributes.get_int("step");
    TESSERA_REQUIRE(step > 0, "slice: step must be positive, got {} (argument 'x' {})", step,
                    x.str());
    const SymInt& n = x.shape[dim];
    SymInt first = start < 0 ? sym_max(n + SymInt(start), 0) : sym_min(SymInt(start), n);
    SymInt last = end == kSliceToEnd ? n
                  : end < 0          ? sym_max(n + SymInt(end), 0)
                                     : sym_min(SymInt(end), n);
    last = sym_max(last, first);
    TensorMeta out = x;
    out.shape[dim] = floordiv(last - first + SymInt(step - 1), SymInt(step));
    return std::vector<TensorMeta>{out};
  };
  op.eager = [](std::span<const Tensor> inputs, const Attributes& attributes) {
    return one(inputs[0].slice(attributes.get_int("dim"), attributes.get_int("start"),
                               attributes.get_int("end"), attributes.get_int("step")));
  };
  return op;
}

OpDef transpose_op() {
  OpDef op;
  op.name = "transpose";
  op.kind = OpKind::view;
  op.row_lowering.accepts = [](const RowCandidate& candidate) {
    return view_keeps_rows(candidate) && candidate.attributes.get_int("dim0") != 0 &&
           candidate.attributes.get_int("dim1") != 0;
  };
  op.row_lowering.emit = [](RowEmitter& emitter) {
    Index source_index = emitter.index();
    std::swap(source_index[emitter.attributes().get_int("dim0")],
              source_index[emitter.attributes().get_int("dim1")]);
    return emitter.value(0, source_index);
  };
  op.input_names = {"x"};
  op.attributes = {{"dim0", std::nullopt}, {"dim1", std::nullopt}};
  op.doc = "swaps two dims (a view)";
  op.canonicalize = wrap_dim_attributes({"dim0", "dim1"});
  op.meta = [](const MetaArgs& args) {
    TensorMeta out = args.input(0);
    int64_t dim0 = wrap_dim_for(args, args.attributes.get_int("dim0"), out.rank());
    int64_t dim1 = wrap_dim_for(args, args.attributes.get_int("dim1"), out.rank());
    std::swap(out.shape[dim0], out.shape[dim1]);
    return std::vector<TensorMeta>{out};
  };
  op.eager = [](std::span<const Tensor> inputs, const Attributes& attributes) {
    return one(inputs[0].transpose(attributes.get_int("dim0"), attributes.get_int("dim1")));
  };
  return op;
}

OpDef contiguous_op() {
  OpDef op;
  op.name = "contiguous";
  op.kind = OpKind::view;
  // Outputs of kernels, inputs and constants are contiguous already; views may not be.
  op.is_identity = [](const IdentityQuery& query) { return !query.input_is_view; };
  op.row_lowering = reshape_lowering();
  op.input_names = {"x"};
  op.doc = "the same values in a contiguous layout (itself when already contiguous)";
  op.meta = [](const MetaArgs& args) { return std::vector<TensorMeta>{args.input(0)}; };
  op.eager = [](std::span<const Tensor> inputs, const Attributes&) {
    return one(inputs[0].contiguous());
  };
  return op;
}

TESSERA_REGISTER_OP(view_op("view", false));
TESSERA_REGISTER_OP(view_op("reshape", true));
TESSERA_REGISTER_OP(slice_op());
TESSERA_REGISTER_OP(transpose_op());
TESSERA_REGISTER_OP(contiguous_op());

}  // namespace
}  // namespace tessera
