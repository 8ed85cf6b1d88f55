// The pointwise ops with a scalar formula, in one table. Adding one is a line in
// TESSERA_POINTWISE_OPS and its formula tsr_<name> in kernels/scalar_math.inc; from those two
// follow its op definition (compile/ops/pointwise.cpp), its CPU and GPU kernels
// (kernels/pointwise_kernel.h) and its lowering into generated row kernels (C++ and NVRTC).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/attributes.h"
#include "runtime/host_device.h"

namespace tessera::scalar {
#define TSR_SCALAR TESSERA_HOST_DEVICE inline
#include "kernels/scalar_math.inc"
#undef TSR_SCALAR
}  // namespace tessera::scalar

namespace tessera {

// A formula's parameter, read from an attribute of the op and passed to the formula as f32: a
// number as itself; a choice (a string attribute, `choices` "none|tanh") as the index of its
// value, defaulting to the first choice.
struct PointwiseParameter {
  const char* attribute = nullptr;
  const char* choices = nullptr;  // nullptr: a number (required)
};
constexpr PointwiseParameter number(const char* attribute) {
  return {attribute, nullptr};
}
constexpr PointwiseParameter choice(const char* attribute, const char* choices) {
  return {attribute, choices};
}

// X(name, inputs, integers, parameters, doc): the op `name` computes tsr_<name>(inputs...,
// parameters...) elementwise over its broadcast inputs (names in parentheses); `integers`: it also
// accepts i32/i64 (its formula has an integer overload), else f32/f16/bf16 only.
#define TESSERA_POINTWISE_OPS(X)                                                       \
  X(neg, ("x"), true, (), "-x")                                                        \
  X(exp, ("x"), false, (), "e^x")                                                      \
  X(log, ("x"), false, (), "natural logarithm")                                        \
  X(sqrt, ("x"), false, (), "square root")                                             \
  X(rsqrt, ("x"), false, (), "1 / sqrt(x)")                                            \
  X(tanh, ("x"), false, (), "hyperbolic tangent")                                      \
  X(sigmoid, ("x"), false, (), "1 / (1 + e^-x)")                                       \
  X(silu, ("x"), false, (), "x * sigmoid(x)")                                          \
  X(gelu, ("x"), false, (choice("approximate", "none|tanh")),                          \
    "GELU; approximate 'none' (erf) or 'tanh'")                                        \
  X(pow_scalar, ("x"), false, (number("exponent")), "x ^ exponent")                    \
  X(add_scalar, ("x"), false, (number("scalar")), "x + scalar")                        \
  X(mul_scalar, ("x"), false, (number("scalar")), "x * scalar")                        \
  X(softcap, ("x"), false, (number("cap")), "cap * tanh(x / cap), logit soft-capping") \
  X(add, ("a", "b"), true, (), "a + b")                                                \
  X(sub, ("a", "b"), true, (), "a - b")                                                \
  X(mul, ("a", "b"), true, (), "a * b")                                                \
  X(div, ("a", "b"), false, (), "a / b")                                               \
  X(maximum, ("a", "b"), true, (), "elementwise max(a, b)")

#define TESSERA_POINTWISE_UNPAREN(...) __VA_ARGS__

template <typename... P>
constexpr std::array<PointwiseParameter, sizeof...(P)> pointwise_parameters(P... parameters) {
  return {parameters...};
}

namespace pointwise {

// One type per table entry, pointwise::<name>, for the kernels' compile-time functors.
#define TESSERA_POINTWISE_FORMULA_TYPE(op_name, inputs, integers, parameters, doc_text) \
  struct op_name {                                                                      \
    static constexpr const char* kName = #op_name;                                      \
    static constexpr std::array kInputNames{TESSERA_POINTWISE_UNPAREN inputs};          \
    static constexpr size_t kInputs = kInputNames.size();                               \
    static constexpr bool kIntegers = integers;                                         \
    static constexpr const char* kDoc = doc_text;                                       \
    static constexpr auto kParameters =                                                 \
        pointwise_parameters(TESSERA_POINTWISE_UNPAREN parameters);                     \
    template <typename... Values>                                                       \
    TESSERA_HOST_DEVICE static auto apply(Values... values) {                           \
      return scalar::tsr_##op_name(values...);                                          \
    }                                                                                   \
  };
TESSERA_POINTWISE_OPS(TESSERA_POINTWISE_FORMULA_TYPE)
#undef TESSERA_POINTWISE_FORMULA_TYPE

}  // namespace pointwise

// The table at run time, for the op definitions and the code generators.
struct PointwiseFormula {
  std::string name;
  std::string function;  // "tsr_<name>", defined by kernels/scalar_math.inc
  std::vector<std::string> input_names;
  bool integers = false;
  std::vector<PointwiseParameter> parameters;
  std::string doc;
};
std::span<const PointwiseFormula> pointwise_formulas();

// The f32 value `parameter` of op `op` takes for `attributes`; throws naming the attribute and
// the valid choices for a choice that is none of them.
float pointwise_parameter_value(const char* op, const PointwiseParameter& parameter,
                                const Attributes& attributes);

// A formula with its parameters read from an op's attributes, called with the inputs' compute
// values (f32, or i32/i64 for `integers` ops). Trivially copyable, so GPU kernels take it by value.
template <typename Formula>
struct PointwiseFunctor {
  static constexpr size_t kParameterCount = Formula::kParameters.size();
  float parameters[kParameterCount > 0 ? kParameterCount : 1] = {};

  PointwiseFunctor() = default;
  // `op` names the op in errors (an activation of silu_and_mul is read for "silu_and_mul").
  explicit PointwiseFunctor(const Attributes& attributes, const char* op = Formula::kName) {
    float* value = parameters;
    for (const PointwiseParameter& parameter : Formula::kParameters)
      *value++ = pointwise_parameter_value(op, parameter, attributes);
  }

  template <typename... Values>
  TESSERA_HOST_DEVICE auto operator()(Values... inputs) const {
    return apply(std::make_index_sequence<kParameterCount>{}, inputs...);
  }

 private:
  template <size_t... P, typename... Values>
  TESSERA_HOST_DEVICE auto apply(std::index_sequence<P...>, Values... inputs) const {
    return Formula::apply(inputs..., parameters[P]...);
  }
};

}  // namespace tessera
