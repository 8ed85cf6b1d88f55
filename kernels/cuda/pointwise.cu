// GPU kernels of the pointwise ops: unary, binary, where and cast. Inputs arrive expanded to the
// output's shape with any strides (0 for broadcast); launch_map (elementwise.cuh) walks them.
// Semantics match the CPU kernels (kernels/cpu/pointwise.cpp) expression for expression:
// f16/bf16 compute in f32, integer arithmetic wraps, maximum propagates NaN, float -> int casts
// truncate toward zero, saturate, and send NaN to 0.
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_registry.h"

namespace tessera::gpu {
namespace {

// Integer arithmetic in the unsigned type wraps around (two's complement) instead of overflowing
// into undefined behavior.
template <typename C, bool = std::is_integral_v<C>>
struct WrapTypeOf {
  using type = C;
};
template <typename C>
struct WrapTypeOf<C, true> {
  using type = std::make_unsigned_t<C>;
};
template <typename C>
using WrapType = typename WrapTypeOf<C>::type;

// ---- Unary ops. kIntegers: the op also accepts i32/i64.

struct NegOp {
  static constexpr const char* kName = "neg";
  static constexpr bool kIntegers = true;
  template <typename C>
  __device__ C operator()(C x) const {
    return static_cast<C>(WrapType<C>{0} - static_cast<WrapType<C>>(x));
  }
};

#define TESSERA_GPU_FLOAT_UNARY_OP(Type, name, expression)            \
  struct Type {                                                       \
    static constexpr const char* kName = name;                        \
    static constexpr bool kIntegers = false;                          \
    __device__ float operator()(float x) const { return expression; } \
  }

TESSERA_GPU_FLOAT_UNARY_OP(ExpOp, "exp", expf(x));
TESSERA_GPU_FLOAT_UNARY_OP(LogOp, "log", logf(x));
TESSERA_GPU_FLOAT_UNARY_OP(SqrtOp, "sqrt", sqrtf(x));
// 1 / sqrt, not rsqrtf: rsqrtf is an approximation, and this should match the CPU closely.
TESSERA_GPU_FLOAT_UNARY_OP(RsqrtOp, "rsqrt", 1.0f / sqrtf(x));
TESSERA_GPU_FLOAT_UNARY_OP(TanhOp, "tanh", tanhf(x));
TESSERA_GPU_FLOAT_UNARY_OP(SigmoidOp, "sigmoid", 1.0f / (1.0f + expf(-x)));
TESSERA_GPU_FLOAT_UNARY_OP(SiluOp, "silu", x / (1.0f + expf(-x)));
#undef TESSERA_GPU_FLOAT_UNARY_OP

struct GeluOp {
  static constexpr const char* kName = "gelu";
  static constexpr bool kIntegers = false;
  bool tanh_form = false;
  explicit GeluOp(const Attributes& attributes) {
    const std::string& approximate = attributes.get_string("approximate");
    TESSERA_REQUIRE(approximate == "none" || approximate == "tanh",
                    "gelu: approximate='{}' is not valid; use 'none' or 'tanh'", approximate);
    tanh_form = approximate == "tanh";
  }
  __device__ float operator()(float x) const {
    if (tanh_form) {
      constexpr float kSqrt2OverPi = 0.7978845608028654f;
      return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    }
    constexpr float kInverseSqrt2 = 0.7071067811865476f;
    return 0.5f * x * (1.0f + erff(x * kInverseSqrt2));
  }
};

// Ops with a scalar attribute, applied in f32.
#define TESSERA_GPU_SCALAR_UNARY_OP(Type, name, attribute, expression)   \
  struct Type {                                                          \
    static constexpr const char* kName = name;                           \
    static constexpr bool kIntegers = false;                             \
    float scalar = 0.0f;                                                 \
    explicit Type(const Attributes& attributes)                          \
        : scalar(static_cast<float>(attributes.get_float(attribute))) {} \
    __device__ float operator()(float x) const { return expression; }    \
  }

TESSERA_GPU_SCALAR_UNARY_OP(PowScalarOp, "pow_scalar", "exponent",
                            scalar == 2.0f ? x * x : powf(x, scalar));
TESSERA_GPU_SCALAR_UNARY_OP(AddScalarOp, "add_scalar", "scalar", x + scalar);
TESSERA_GPU_SCALAR_UNARY_OP(MulScalarOp, "mul_scalar", "scalar", scalar* x);
#undef TESSERA_GPU_SCALAR_UNARY_OP

// ---- Binary ops.

#define TESSERA_GPU_BINARY_OP(Type, name, integers, expression) \
  struct Type {                                                 \
    static constexpr const char* kName = name;                  \
    static constexpr bool kIntegers = integers;                 \
    template <typename C>                                       \
    __device__ C operator()(C a, C b) const {                   \
      return expression;                                        \
    }                                                           \
  }

#define TESSERA_WRAP(x) static_cast<WrapType<C>>(x)
TESSERA_GPU_BINARY_OP(AddOp, "add", true, static_cast<C>(TESSERA_WRAP(a) + TESSERA_WRAP(b)));
TESSERA_GPU_BINARY_OP(SubOp, "sub", true, static_cast<C>(TESSERA_WRAP(a) - TESSERA_WRAP(b)));
TESSERA_GPU_BINARY_OP(MulOp, "mul", true, static_cast<C>(TESSERA_WRAP(a) * TESSERA_WRAP(b)));
#undef TESSERA_WRAP
TESSERA_GPU_BINARY_OP(DivOp, "div", false, a / b);
// NaN in either input gives NaN, as torch.maximum does.
TESSERA_GPU_BINARY_OP(MaximumOp, "maximum", true, (a > b || a != a) ? a : b);
#undef TESSERA_GPU_BINARY_OP

// ---- Functors over storage types: convert to the compute type, apply, convert back.

template <typename T, typename Op>
struct UnaryFunctor {
  Op op;
  __device__ T operator()(T x) const { return from_compute<T>(op(to_compute(x))); }
};

template <typename T, typename Op>
struct BinaryFunctor {
  Op op;
  __device__ T operator()(T a, T b) const {
    return from_compute<T>(op(to_compute(a), to_compute(b)));
  }
};

// where only selects, so values move as raw bits of their width.
template <typename Condition, typename Bits>
struct WhereFunctor {
  __device__ Bits operator()(Condition condition, Bits a, Bits b) const {
    return condition != 0 ? a : b;
  }
};

template <typename To, typename From>
struct CastFunctor {
  __device__ To operator()(From value) const {
    if constexpr (std::is_same_v<To, From>) {
      return value;
    } else if constexpr (std::is_integral_v<From>) {
      if constexpr (std::is_integral_v<To>)
        return static_cast<To>(value);
      else
        return from_compute<To>(static_cast<float>(value));
    } else {
      const float x = to_compute(value);
      if constexpr (std::is_integral_v<To>) {
        // Explicit, because an out-of-range float -> int conversion is undefined in C++.
        if (x != x) return To{0};
        if (x >= static_cast<float>(std::numeric_limits<To>::max()))
          return std::numeric_limits<To>::max();
        if (x <= static_cast<float>(std::numeric_limits<To>::min()))
          return std::numeric_limits<To>::min();
        return static_cast<To>(x);
      } else {
        return from_compute<To>(x);
      }
    }
  }
};

// ---- Kernel entry points.

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
    visit_device_dtype(dtype, fn);
  } else {
    visit_device_float_dtype(Op::kName, dtype, fn);
  }
}

template <typename Op>
void unary_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_dtype(Op::kName, "output", out, x.dtype());
  const Op op = make_op<Op>(args.attributes);
  visit_op_dtype<Op>(x.dtype(), [&]<typename T>() {
    launch_map<T>(Op::kName, out, UnaryFunctor<T, Op>{op}, Input<T>{x});
  });
}

template <typename Op>
void binary_kernel(const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& out = args.outputs[0];
  require_dtype(Op::kName, "input b", b, a.dtype());
  require_dtype(Op::kName, "output", out, a.dtype());
  visit_op_dtype<Op>(a.dtype(), [&]<typename T>() {
    launch_map<T>(Op::kName, out, BinaryFunctor<T, Op>{Op{}}, Input<T>{a}, Input<T>{b});
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
  visit_device_dtype(condition.dtype(), [&]<typename Condition>() {
    if constexpr (std::is_integral_v<Condition>) {
      visit_element_bits(a.dtype(), [&]<typename Bits>() {
        launch_map<Bits>("where", out, WhereFunctor<Condition, Bits>{}, Input<Condition>{condition},
                         Input<Bits>{a}, Input<Bits>{b});
      });
    }
  });
}

void cast_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  require_dtype("cast", "output", out, args.attributes.get_dtype("dtype"));
  visit_device_dtype(x.dtype(), [&]<typename From>() {
    visit_device_dtype(out.dtype(), [&]<typename To>() {
      launch_map<To>("cast", out, CastFunctor<To, From>{}, Input<From>{x});
    });
  });
}

TESSERA_REGISTER_KERNEL("neg", kGpuDeviceType, unary_kernel<NegOp>);
TESSERA_REGISTER_KERNEL("exp", kGpuDeviceType, unary_kernel<ExpOp>);
TESSERA_REGISTER_KERNEL("log", kGpuDeviceType, unary_kernel<LogOp>);
TESSERA_REGISTER_KERNEL("sqrt", kGpuDeviceType, unary_kernel<SqrtOp>);
TESSERA_REGISTER_KERNEL("rsqrt", kGpuDeviceType, unary_kernel<RsqrtOp>);
TESSERA_REGISTER_KERNEL("tanh", kGpuDeviceType, unary_kernel<TanhOp>);
TESSERA_REGISTER_KERNEL("sigmoid", kGpuDeviceType, unary_kernel<SigmoidOp>);
TESSERA_REGISTER_KERNEL("silu", kGpuDeviceType, unary_kernel<SiluOp>);
TESSERA_REGISTER_KERNEL("gelu", kGpuDeviceType, unary_kernel<GeluOp>);
TESSERA_REGISTER_KERNEL("pow_scalar", kGpuDeviceType, unary_kernel<PowScalarOp>);
TESSERA_REGISTER_KERNEL("add_scalar", kGpuDeviceType, unary_kernel<AddScalarOp>);
TESSERA_REGISTER_KERNEL("mul_scalar", kGpuDeviceType, unary_kernel<MulScalarOp>);
TESSERA_REGISTER_KERNEL("add", kGpuDeviceType, binary_kernel<AddOp>);
TESSERA_REGISTER_KERNEL("sub", kGpuDeviceType, binary_kernel<SubOp>);
TESSERA_REGISTER_KERNEL("mul", kGpuDeviceType, binary_kernel<MulOp>);
TESSERA_REGISTER_KERNEL("div", kGpuDeviceType, binary_kernel<DivOp>);
TESSERA_REGISTER_KERNEL("maximum", kGpuDeviceType, binary_kernel<MaximumOp>);
TESSERA_REGISTER_KERNEL("where", kGpuDeviceType, where_kernel);
TESSERA_REGISTER_KERNEL("cast", kGpuDeviceType, cast_kernel);

}  // namespace
}  // namespace tessera::gpu
