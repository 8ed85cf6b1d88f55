#include "kernels/activation_and_mul_linear.h"

#include <string>
#include <vector>

#include "kernels/kernel_checks.h"
#include "runtime/check.h"

namespace tessera {

std::string activation_of(const char* fused_op) {
  std::string name = fused_op;
  const std::string suffix = "_linear";
  TESSERA_CHECK(name.ends_with(suffix), "{} is not an activation_and_mul_linear op", name);
  return name.substr(0, name.size() - suffix.size());
}

void check_activation_and_mul_linear(const char* op, const KernelArgs& args) {
  TESSERA_CHECK(args.inputs.size() == 2 || args.inputs.size() == 3, "{}: {} inputs", op,
                args.inputs.size());
  TESSERA_CHECK(args.outputs.size() == 2, "{}: {} outputs", op, args.outputs.size());
  const Tensor& x = args.inputs[0];
  const Tensor& activated = args.outputs[1];
  require_float_contiguous(op, "x", x);
  require_contiguous(op, "activation output", activated);
  TESSERA_REQUIRE(x.dim() >= 1 && x.sizes().back() % 2 == 0,
                  "{}: x {} needs an even last size (gate and up halves)", op, x.str());
  Shape activated_sizes = x.sizes();
  activated_sizes.back() /= 2;
  require_dtype(op, "activation output", activated, x.dtype());
  require_sizes(op, "activation output", activated, activated_sizes);
  check_linear(activated, args.inputs[1], args.inputs.size() == 3 ? &args.inputs[2] : nullptr,
               args.outputs[0]);
}

void run_activation_and_mul_then_linear(const char* op, DeviceType device, const KernelArgs& args) {
  check_activation_and_mul_linear(op, args);
  run_kernel(activation_of(op), device,
             KernelArgs{args.inputs.subspan(0, 1), args.attributes, args.outputs.subspan(1, 1)});
  std::vector<Tensor> linear_inputs(args.inputs.begin(), args.inputs.end());
  linear_inputs[0] = args.outputs[1];
  const Attributes none;
  run_kernel("linear", device,
             KernelArgs{linear_inputs, none, args.outputs.subspan(0, 1), args.prefetch});
}

namespace {

template <const char* kOp>
void cpu_activation_and_mul_linear(const KernelArgs& args) {
  run_activation_and_mul_then_linear(kOp, DeviceType::cpu, args);
}

constexpr char kSiluLinear[] = "silu_and_mul_linear";
constexpr char kGeluLinear[] = "gelu_and_mul_linear";
TESSERA_REGISTER_KERNEL(kSiluLinear, DeviceType::cpu, cpu_activation_and_mul_linear<kSiluLinear>);
TESSERA_REGISTER_KERNEL(kGeluLinear, DeviceType::cpu, cpu_activation_and_mul_linear<kGeluLinear>);

}  // namespace
}  // namespace tessera
