// Pointwise ops: those of the scalar-formula table (kernels/pointwise_table.h), where and cast.
// Their kernels read inputs with any strides (strided_inputs), so transposes and broadcasts never
// copy.
#include "compile/codegen/row_lowering.h"
#include "compile/ops/meta_helpers.h"
#include "kernels/pointwise_table.h"
#include "runtime/check.h"

namespace tessera {
namespace {

constexpr std::initializer_list<DType> kNumericDTypes = {DType::f32, DType::f16, DType::bf16,
                                                         DType::i32, DType::i64};

OpDef pointwise_op(const std::string& name, std::vector<std::string> input_names,
                   const std::string& doc) {
  OpDef op;
  op.name = name;
  op.kind = OpKind::pointwise;
  op.input_names = std::move(input_names);
  op.strided_inputs = true;
  op.doc = doc;
  return op;
}

// Inputs of one dtype (f32/f16/bf16, or also i32/i64 with `integers`), broadcast together.
MetaFn same_dtype_broadcast_meta(bool integers) {
  return [integers](const MetaArgs& args) {
    for (size_t i = 0; i < args.inputs.size(); ++i) {
      if (integers)
        require_dtype_in(args, i, kNumericDTypes);
      else
        require_float(args, i);
      require_same_dtype(args, 0, i);
    }
    TensorMeta out = args.input(0);
    if (args.inputs.size() > 1) {
      std::vector<size_t> all(args.inputs.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      out.shape = broadcast_shapes(args, all);
    }
    return std::vector<TensorMeta>{out};
  };
}

// The formula applied to the inputs at the output's index, parameters as f32 literals.
RowLowering formula_lowering(const PointwiseFormula& formula) {
  return {[](const RowCandidate& candidate) { return candidate.float_inputs(); },
          [formula](RowEmitter& emitter) {
            std::vector<std::string> arguments;
            for (size_t i = 0; i < emitter.num_inputs(); ++i)
              arguments.push_back(emitter.broadcast_value(i));
            for (const PointwiseParameter& parameter : formula.parameters) {
              arguments.push_back(float_literal(pointwise_parameter_value(
                  formula.name.c_str(), parameter, emitter.attributes())));
            }
            return fmt::format("{}({})", formula.function, fmt::join(arguments, ", "));
          }};
}

OpDef formula_op(const PointwiseFormula& formula) {
  OpDef op = pointwise_op(formula.name, formula.input_names, formula.doc);
  for (const PointwiseParameter& parameter : formula.parameters) {
    std::optional<AttributeValue> default_value;
    if (parameter.choices != nullptr) {
      std::string choices = parameter.choices;
      default_value = choices.substr(0, choices.find('|'));
    }
    op.attributes.push_back({parameter.attribute, default_value});
  }
  MetaFn meta = same_dtype_broadcast_meta(formula.integers);
  // A choice outside its choices is refused here, before any kernel or generated code sees it.
  op.meta = [meta, formula](const MetaArgs& args) {
    for (const PointwiseParameter& parameter : formula.parameters)
      pointwise_parameter_value(formula.name.c_str(), parameter, args.attributes);
    return meta(args);
  };
  op.row_lowering = formula_lowering(formula);
  return op;
}

OpDef where_op() {
  OpDef op = pointwise_op("where", {"condition", "a", "b"},
                          "condition ? a : b (condition i32/i64, nonzero is true), broadcasting "
                          "all three");
  op.meta = [](const MetaArgs& args) {
    require_dtype_in(args, 0, {DType::i32, DType::i64});
    require_same_dtype(args, 1, 2);
    TensorMeta out = args.input(1);
    out.shape = broadcast_shapes(args, {0, 1, 2});
    return std::vector<TensorMeta>{out};
  };
  op.row_lowering.accepts = [](const RowCandidate& candidate) {
    return is_floating(candidate.inputs[1].dtype) && is_floating(candidate.inputs[2].dtype);
  };
  op.row_lowering.emit = [](RowEmitter& emitter) {
    // Both branches index the broadcast output, so their reads are valid for every lane.
    return fmt::format("({} != 0 ? {} : {})", emitter.integer(0, emitter.broadcast_index(0)).text,
                       emitter.broadcast_value(1), emitter.broadcast_value(2));
  };
  return op;
}

OpDef cast_op() {
  OpDef op =
      pointwise_op("cast", {"x"}, "converts to another dtype (float to int truncates toward zero)");
  op.attributes = {{"dtype", std::nullopt}};
  op.meta = [](const MetaArgs& args) {
    TensorMeta out = args.input(0);
    out.dtype = args.attributes.get_dtype("dtype");
    return std::vector<TensorMeta>{out};
  };
  op.is_identity = [](const IdentityQuery& query) {
    return query.input.dtype == query.output.dtype;
  };
  op.row_lowering.accepts = [](const RowCandidate& candidate) { return candidate.float_inputs(); };
  // Row kernels compute in f32: a cast to a 16-bit float rounds to its precision.
  op.row_lowering.emit = [](RowEmitter& emitter) {
    std::string x = emitter.broadcast_value(0);
    DType to = emitter.output_meta().dtype;
    if (to == DType::bf16) return fmt::format("tsr_round_bf16({})", x);
    if (to == DType::f16) return fmt::format("tsr_round_f16({})", x);
    return x;
  };
  return op;
}

// The table's ops, registered when this library loads (pointwise_formulas() is built on first
// use, so the order of static initialization does not matter).
[[maybe_unused]] const bool formula_ops_registered = [] {
  for (const PointwiseFormula& formula : pointwise_formulas())
    OpRegistry::global().add(formula_op(formula));
  return true;
}();
TESSERA_REGISTER_OP(where_op());
TESSERA_REGISTER_OP(cast_op());

}  // namespace
}  // namespace tessera
