// Pointwise ops: unary, binary with broadcasting, where, cast. Their kernels read inputs with any
// strides (strided_inputs), so transposes and broadcasts never copy.
#include "compile/ops/meta_helpers.h"

namespace tessera {
namespace {

constexpr std::initializer_list<DType> kNumericDTypes = {DType::f32, DType::f16, DType::bf16,
                                                         DType::i32, DType::i64};

OpDef unary_op(const std::string& name, bool allows_ints, std::vector<AttributeSpec> attributes,
               const std::string& doc) {
  OpDef op;
  op.name = name;
  op.input_names = {"x"};
  op.attributes = std::move(attributes);
  op.strided_inputs = true;
  op.doc = doc;
  op.meta = [allows_ints](const MetaArgs& args) {
    if (allows_ints)
      require_dtype_in(args, 0, kNumericDTypes);
    else
      require_float(args, 0);
    return std::vector<TensorMeta>{args.input(0)};
  };
  return op;
}

OpDef binary_op(const std::string& name, bool allows_ints, const std::string& doc) {
  OpDef op;
  op.name = name;
  op.input_names = {"a", "b"};
  op.strided_inputs = true;
  op.doc = doc;
  op.meta = [allows_ints](const MetaArgs& args) {
    for (size_t i = 0; i < 2; ++i) {
      if (allows_ints)
        require_dtype_in(args, i, kNumericDTypes);
      else
        require_float(args, i);
    }
    require_same_dtype(args, 0, 1);
    TensorMeta out = args.input(0);
    out.shape = broadcast_shapes(args, {0, 1});
    return std::vector<TensorMeta>{out};
  };
  return op;
}

OpDef where_op() {
  OpDef op;
  op.name = "where";
  op.input_names = {"condition", "a", "b"};
  op.strided_inputs = true;
  op.doc = "condition ? a : b (condition i32/i64, nonzero is true), broadcasting all three";
  op.meta = [](const MetaArgs& args) {
    require_dtype_in(args, 0, {DType::i32, DType::i64});
    require_same_dtype(args, 1, 2);
    TensorMeta out = args.input(1);
    out.shape = broadcast_shapes(args, {0, 1, 2});
    return std::vector<TensorMeta>{out};
  };
  return op;
}

OpDef cast_op() {
  OpDef op;
  op.name = "cast";
  op.input_names = {"x"};
  op.attributes = {{"dtype", std::nullopt}};
  op.strided_inputs = true;
  op.doc = "converts to another dtype (float to int truncates toward zero)";
  op.meta = [](const MetaArgs& args) {
    TensorMeta out = args.input(0);
    out.dtype = args.attributes.get_dtype("dtype");
    return std::vector<TensorMeta>{out};
  };
  return op;
}

const AttributeSpec kScalar{"scalar", std::nullopt};

TESSERA_REGISTER_OP(unary_op("neg", true, {}, "-x"));
TESSERA_REGISTER_OP(unary_op("exp", false, {}, "e^x"));
TESSERA_REGISTER_OP(unary_op("log", false, {}, "natural logarithm"));
TESSERA_REGISTER_OP(unary_op("sqrt", false, {}, "square root"));
TESSERA_REGISTER_OP(unary_op("rsqrt", false, {}, "1 / sqrt(x)"));
TESSERA_REGISTER_OP(unary_op("tanh", false, {}, "hyperbolic tangent"));
TESSERA_REGISTER_OP(unary_op("sigmoid", false, {}, "1 / (1 + e^-x)"));
TESSERA_REGISTER_OP(unary_op("silu", false, {}, "x * sigmoid(x)"));
TESSERA_REGISTER_OP(unary_op("gelu", false, {{"approximate", std::string("none")}},
                             "GELU; approximate 'none' (erf) or 'tanh'"));
TESSERA_REGISTER_OP(unary_op("pow_scalar", false, {{"exponent", std::nullopt}}, "x ^ exponent"));
TESSERA_REGISTER_OP(unary_op("add_scalar", false, {kScalar}, "x + scalar"));
TESSERA_REGISTER_OP(unary_op("mul_scalar", false, {kScalar}, "x * scalar"));
TESSERA_REGISTER_OP(binary_op("add", true, "a + b"));
TESSERA_REGISTER_OP(binary_op("sub", true, "a - b"));
TESSERA_REGISTER_OP(binary_op("mul", true, "a * b"));
TESSERA_REGISTER_OP(binary_op("div", false, "a / b"));
TESSERA_REGISTER_OP(binary_op("maximum", true, "elementwise max(a, b)"));
TESSERA_REGISTER_OP(where_op());
TESSERA_REGISTER_OP(cast_op());

}  // namespace
}  // namespace tessera
