// CPU kernels of the pointwise ops: unary, binary, where, cast and copy. Inputs arrive expanded
// to the output's shape with any strides; map_elements (strided_loop.h) walks them.
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/strided_loop.h"
#include "kernels/kernel_registry.h"

namespace tessera::cpu {
namespace {

// Integer arithmetic wraps around (two's complement) instead of overflowing into UB.
template <typename C, typename Fn>
C wrapping(C a, C b, Fn fn) {
  if constexpr (std::is_integral_v<C>) {
    using Unsigned = std::make_unsigned_t<C>;
    return static_cast<C>(fn(static_cast<Unsigned>(a), static_cast<Unsigned>(b)));
  } else {
    return fn(a, b);
  }
}

// ---- Unary ops. kIntegers: the op also accepts i32/i64.

struct NegOp {
  static constexpr const char* kName = "neg";
  static constexpr bool kIntegers = true;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_integral_v<C>)
      return wrapping(C{0}, x, [](auto a, auto b) { return a - b; });
    else
      return -x;  // keeps neg(0) == -0
  }
};

#define TESSERA_FLOAT_UNARY_OP(Type, name, expression)     \
  struct Type {                                            \
    static constexpr const char* kName = name;             \
    static constexpr bool kIntegers = false;               \
    float operator()(float x) const { return expression; } \
  }

TESSERA_FLOAT_UNARY_OP(ExpOp, "exp", std::exp(x));
TESSERA_FLOAT_UNARY_OP(LogOp, "log", std::log(x));
TESSERA_FLOAT_UNARY_OP(SqrtOp, "sqrt", std::sqrt(x));
TESSERA_FLOAT_UNARY_OP(RsqrtOp, "rsqrt", 1.0f / std::sqrt(x));
TESSERA_FLOAT_UNARY_OP(TanhOp, "tanh", std::tanh(x));
TESSERA_FLOAT_UNARY_OP(SigmoidOp, "sigmoid", 1.0f / (1.0f + std::exp(-x)));
TESSERA_FLOAT_UNARY_OP(SiluOp, "silu", silu(x));
#undef TESSERA_FLOAT_UNARY_OP

struct GeluOp {
  static constexpr const char* kName = "gelu";
  static constexpr bool kIntegers = false;
  bool tanh_form;
  explicit GeluOp(const Attributes& attributes) : tanh_form(gelu_tanh_form(kName, attributes)) {}
  float operator()(float x) const { return gelu(x, tanh_form); }
};

// Ops with a scalar attribute, applied in f32.
#define TESSERA_SCALAR_UNARY_OP(Type, name, attribute, expression)       \
  struct Type {                                                          \
    static constexpr const char* kName = name;                           \
    static constexpr bool kIntegers = false;                             \
    float scalar;                                                        \
    explicit Type(const Attributes& attributes)                          \
        : scalar(static_cast<float>(attributes.get_float(attribute))) {} \
    float operator()(float x) const { return expression; }               \
  }

TESSERA_SCALAR_UNARY_OP(PowScalarOp, "pow_scalar", "exponent",
                        scalar == 2.0f ? x * x : std::pow(x, scalar));
TESSERA_SCALAR_UNARY_OP(AddScalarOp, "add_scalar", "scalar", x + scalar);
TESSERA_SCALAR_UNARY_OP(MulScalarOp, "mul_scalar", "scalar", (x * scalar));
#undef TESSERA_SCALAR_UNARY_OP

// ---- Binary ops.

#define TESSERA_BINARY_OP(Type, name, integers, expression) \
  struct Type {                                             \
    static constexpr const char* kName = name;              \
    static constexpr bool kIntegers = integers;             \
    template <typename C>                                   \
    C operator()(C a, C b) const {                          \
      return expression;                                    \
    }                                                       \
  }

TESSERA_BINARY_OP(AddOp, "add", true, wrapping(a, b, [](auto x, auto y) { return x + y; }));
TESSERA_BINARY_OP(SubOp, "sub", true, wrapping(a, b, [](auto x, auto y) { return x - y; }));
TESSERA_BINARY_OP(MulOp, "mul", true, wrapping(a, b, [](auto x, auto y) { return x * y; }));
TESSERA_BINARY_OP(DivOp, "div", false, a / b);
// NaN in either input gives NaN, as torch.maximum does.
TESSERA_BINARY_OP(MaximumOp, "maximum", true, (a > b || a != a) ? a : b);
#undef TESSERA_BINARY_OP

template <typename Op>
Op make_op(const Attributes& attributes) {
  if constexpr (std::is_constructible_v<Op, const Attributes&>) {
    return Op(attributes);
  } else {
    return Op{};
  }
}

// Calls fn<T>() for the dtype, refusing integer dtypes for float-only ops.
template <typename Op, typename Fn>
void visit_op_dtype(DType dtype, Fn&& fn) {
  if constexpr (Op::kIntegers) {
    visit_dtype(dtype, fn);
  } else {
    visit_float_dtype(Op::kName, dtype, fn);
  }
}

template <typename Op>
void unary_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_dtype(Op::kName, "output", out, x.dtype());
  const Op op = make_op<Op>(args.attributes);
  visit_op_dtype<Op>(x.dtype(), [&]<typename T>() {
    map_elements<T>(
        out, [&](T value) { return static_cast<T>(op(static_cast<ComputeType<T>>(value))); },
        Input<T>{x});
  });
}

template <typename Op>
void binary_kernel(const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& out = args.outputs[0];
  require_dtype(Op::kName, "input b", b, a.dtype());
  require_dtype(Op::kName, "output", out, a.dtype());
  const Op op;
  visit_op_dtype<Op>(a.dtype(), [&]<typename T>() {
    using C = ComputeType<T>;
    map_elements<T>(
        out, [&](T x, T y) { return static_cast<T>(op(static_cast<C>(x), static_cast<C>(y))); },
        Input<T>{a}, Input<T>{b});
  });
}

void where_kernel(const KernelArgs& args) {
  const Tensor& condition = args.inputs[0];
  const Tensor& a = args.inputs[1];
  const Tensor& b = args.inputs[2];
  const Tensor& out = args.outputs[0];
  TESSERA_REQUIRE(condition.dtype() == DType::i32 || condition.dtype() == DType::i64,
                  "where: condition has dtype {}; use i32 or i64 (nonzero is true)",
                  dtype_name(condition.dtype()));
  require_dtype("where", "input b", b, a.dtype());
  require_dtype("where", "output", out, a.dtype());
  // where only selects, so values move as raw bits of their width.
  visit_dtype(condition.dtype(), [&]<typename Condition>() {
    if constexpr (std::is_integral_v<Condition>) {
      visit_element_bits(a.dtype(), [&]<typename Bits>() {
        map_elements<Bits>(
            out, [](Condition c, Bits x, Bits y) { return c != 0 ? x : y; },
            Input<Condition>{condition}, Input<Bits>{a}, Input<Bits>{b});
      });
    }
  });
}

// Float to integer truncates toward zero; NaN becomes 0 and out-of-range values saturate (a plain
// static_cast would be undefined behavior there).
template <typename To, typename From>
To convert_element(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_integral_v<From>) {
    if constexpr (std::is_integral_v<To>)
      return static_cast<To>(value);
    else
      return To(static_cast<float>(value));
  } else {
    const float x = static_cast<float>(value);
    if constexpr (std::is_integral_v<To>) {
      if (x != x) return To{0};
      if (x >= static_cast<float>(std::numeric_limits<To>::max()))
        return std::numeric_limits<To>::max();
      if (x <= static_cast<float>(std::numeric_limits<To>::min()))
        return std::numeric_limits<To>::min();
      return static_cast<To>(x);
    } else {
      return To(x);
    }
  }
}

void cast_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_dtype("cast", "output", out, args.attributes.get_dtype("dtype"));
  visit_dtype(x.dtype(), [&]<typename From>() {
    visit_dtype(out.dtype(), [&]<typename To>() {
      map_elements<To>(
          out, [](From value) { return convert_element<To>(value); }, Input<From>{x});
    });
  });
}

// Both sides may be strided (Tensor::copy_from writes into views).
void copy_kernel(const KernelArgs& args) {
  const Tensor& source = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_dtype("copy", "destination", out, source.dtype());
  require_sizes("copy", "destination", out, source.sizes());
  visit_element_bits(source.dtype(), [&]<typename Bits>() {
    map_elements<Bits>(
        out, [](Bits value) { return value; }, Input<Bits>{source});
  });
}

constexpr DeviceType kCpu = DeviceType::cpu;
TESSERA_REGISTER_KERNEL("neg", kCpu, unary_kernel<NegOp>);
TESSERA_REGISTER_KERNEL("exp", kCpu, unary_kernel<ExpOp>);
TESSERA_REGISTER_KERNEL("log", kCpu, unary_kernel<LogOp>);
TESSERA_REGISTER_KERNEL("sqrt", kCpu, unary_kernel<SqrtOp>);
TESSERA_REGISTER_KERNEL("rsqrt", kCpu, unary_kernel<RsqrtOp>);
TESSERA_REGISTER_KERNEL("tanh", kCpu, unary_kernel<TanhOp>);
TESSERA_REGISTER_KERNEL("sigmoid", kCpu, unary_kernel<SigmoidOp>);
TESSERA_REGISTER_KERNEL("silu", kCpu, unary_kernel<SiluOp>);
TESSERA_REGISTER_KERNEL("gelu", kCpu, unary_kernel<GeluOp>);
TESSERA_REGISTER_KERNEL("pow_scalar", kCpu, unary_kernel<PowScalarOp>);
TESSERA_REGISTER_KERNEL("add_scalar", kCpu, unary_kernel<AddScalarOp>);
TESSERA_REGISTER_KERNEL("mul_scalar", kCpu, unary_kernel<MulScalarOp>);
TESSERA_REGISTER_KERNEL("add", kCpu, binary_kernel<AddOp>);
TESSERA_REGISTER_KERNEL("sub", kCpu, binary_kernel<SubOp>);
TESSERA_REGISTER_KERNEL("mul", kCpu, binary_kernel<MulOp>);
TESSERA_REGISTER_KERNEL("div", kCpu, binary_kernel<DivOp>);
TESSERA_REGISTER_KERNEL("maximum", kCpu, binary_kernel<MaximumOp>);
TESSERA_REGISTER_KERNEL("where", kCpu, where_kernel);
TESSERA_REGISTER_KERNEL("cast", kCpu, cast_kernel);
TESSERA_REGISTER_KERNEL("copy", kCpu, copy_kernel);

}  // namespace
}  // namespace tessera::cpu
