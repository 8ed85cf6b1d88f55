#include "compile/trace/dispatch.h"

#include "compile/launch_profile.h"
#include "compile/trace/fake_tensor.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/profiler/profiler.h"

namespace tessera {

namespace {

thread_local DispatchHandler* active_handler = nullptr;

// Runs `body`, prefixing the op's name to a user error that does not already name it (errors
// from attribute getters and shape helpers know nothing of the op).
template <typename Body>
auto naming_op(const OpDef& op, Body&& body) {
  try {
    return body();
  } catch (const Error& error) {
    std::string message = error.what();
    if (message.starts_with(op.name + ":")) throw;
    throw Error(fmt::format("{}: {}", op.name, message));
  }
}

thread_local const CustomOpConfig* active_custom_op_rule = nullptr;

Shape concrete_shape(const TensorMeta& meta) {
  Shape sizes;
  sizes.reserve(meta.shape.size());
  for (const SymInt& size : meta.shape) sizes.push_back(size.constant());
  return sizes;
}

// Checks that tensor inputs are defined and on one device; returns that device.
Device common_device(const OpDef& op, std::span<const Tensor> inputs) {
  Device device = kCPU;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSERA_REQUIRE(inputs[i].defined(), "{}: argument {} is an undefined tensor", op.name, i);
    if (i == 0) {
      device = inputs[i].device();
    } else {
      TESSERA_REQUIRE(inputs[i].device() == device,
                      "{}: all tensor arguments must be on one device, but argument 0 is on {} and "
                      "argument {} on {}",
                      op.name, device.str(), i, inputs[i].device().str());
    }
  }
  return device;
}

// Inputs as the kernel contract wants them: expanded to the output shape for strided-input ops,
// contiguous for the rest.
std::vector<Tensor> prepare_inputs(const OpDef& op, std::span<const Tensor> inputs,
                                   const Shape& output_sizes) {
  std::vector<Tensor> prepared;
  prepared.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    if (op.strided_inputs) {
      prepared.push_back(input.sizes() == output_sizes ? input : input.expand(output_sizes));
    } else {
      prepared.push_back(input.contiguous());
    }
  }
  return prepared;
}

std::vector<Tensor> launch_kernel(const OpDef& op, KernelFn kernel, std::span<const Tensor> inputs,
                                  const Attributes& attributes,
                                  const std::vector<TensorMeta>& metas, Device device) {
  std::vector<Tensor> prepared = prepare_inputs(op, inputs, concrete_shape(metas[0]));
  std::vector<Tensor> outputs;
  outputs.reserve(metas.size());
  bool any_elements = false;
  for (const TensorMeta& meta : metas) {
    outputs.push_back(Tensor::empty(concrete_shape(meta), meta.dtype, device));
    any_elements = any_elements || outputs.back().numel() > 0;
  }
  if (any_elements) {
    ProfiledLaunch profiled(op.name, kernel_class_of(op),
                            [&] { return launch_detail(op, prepared, outputs, attributes); });
    kernel(KernelArgs{prepared, attributes, outputs});
  }
  return outputs;
}

std::vector<Tensor> run_eager_impl(const OpDef& op, std::span<const Tensor> inputs,
                                   const Attributes& given, bool allow_decomposition) {
  Attributes attributes = prepare_attributes(op, inputs, given);
  Device device = common_device(op, inputs);
  std::vector<TensorMeta> metas = compute_output_metas(op, inputs, attributes);
  if (op.eager) return op.eager(inputs, attributes);
  if (allow_decomposition && op.custom && op.decompose && !eager_custom_op_enabled(op.name)) {
    return op.decompose(inputs, attributes);
  }
  KernelFn kernel = find_kernel(op.name, device.type);
  if (kernel == nullptr) {
    if (allow_decomposition && op.decompose) return op.decompose(inputs, attributes);
    throw Error(
        fmt::format("{}: no kernel for device {} and no decomposition", op.name, device.str()));
  }
  return launch_kernel(op, kernel, inputs, attributes, metas, device);
}

}  // namespace

DispatchHandler* current_dispatch_handler() {
  return active_handler;
}

DispatchHandlerGuard::DispatchHandlerGuard(DispatchHandler* handler) : previous_(active_handler) {
  active_handler = handler;
}

DispatchHandlerGuard::~DispatchHandlerGuard() {
  active_handler = previous_;
}

EagerCustomOpRuleGuard::EagerCustomOpRuleGuard(const CustomOpConfig& rule)
    : previous_(active_custom_op_rule) {
  active_custom_op_rule = &rule;
}

EagerCustomOpRuleGuard::~EagerCustomOpRuleGuard() {
  active_custom_op_rule = previous_;
}

bool eager_custom_op_enabled(const std::string& op_name) {
  return active_custom_op_rule == nullptr || active_custom_op_rule->enabled(op_name);
}

Attributes prepare_attributes(const OpDef& op, std::span<const Tensor> inputs,
                              const Attributes& given) {
  check_input_count(op, inputs.size());
  Attributes attributes = complete_attributes(op, given);
  if (op.canonicalize) {
    std::vector<TensorMeta> metas;
    for (const Tensor& input : inputs) metas.push_back(meta_of(input));
    naming_op(op, [&] {
      op.canonicalize(metas, attributes);
      return 0;
    });
  }
  return attributes;
}

TensorMeta meta_of(const Tensor& tensor) {
  if (const FakeTensorInfo* fake = fake_tensor_info(tensor)) {
    return TensorMeta{tensor.dtype(), tensor.device(), fake->shape};
  }
  return TensorMeta{tensor.dtype(), tensor.device(), to_sym_shape(tensor.sizes())};
}

std::vector<TensorMeta> compute_output_metas(const OpDef& op, std::span<const Tensor> inputs,
                                             const Attributes& attributes) {
  std::vector<TensorMeta> input_metas;
  input_metas.reserve(inputs.size());
  for (const Tensor& input : inputs) input_metas.push_back(meta_of(input));
  return naming_op(op, [&] { return op.meta(MetaArgs{op, input_metas, attributes}); });
}

std::vector<Tensor> call_op(const OpDef& op, std::span<const Tensor> inputs,
                            const Attributes& attributes) {
  if (active_handler != nullptr) return active_handler->handle(op, inputs, attributes);
  return run_eager_impl(op, inputs, attributes, /*allow_decomposition=*/true);
}

std::vector<Tensor> call_op(const std::string& name, std::span<const Tensor> inputs,
                            const Attributes& attributes) {
  return call_op(OpRegistry::global().get(name), inputs, attributes);
}

std::vector<Tensor> run_eager(const OpDef& op, std::span<const Tensor> inputs,
                              const Attributes& attributes) {
  return run_eager_impl(op, inputs, attributes, /*allow_decomposition=*/true);
}

void run_kernel_into(const OpDef& op, std::span<const Tensor> inputs, const Attributes& attributes,
                     std::span<Tensor> outputs) {
  TESSERA_CHECK(!outputs.empty(), "{}: no outputs given", op.name);
  Device device = outputs[0].device();
  KernelFn kernel = find_kernel(op.name, device.type);
  TESSERA_REQUIRE(kernel != nullptr, "{}: no kernel for device {}", op.name, device.str());
  std::vector<Tensor> prepared = prepare_inputs(op, inputs, outputs[0].sizes());
  for (const Tensor& output : outputs)
    if (output.numel() > 0) return kernel(KernelArgs{prepared, attributes, outputs});
}

std::vector<Tensor> run_kernel_of(const OpDef& op, std::span<const Tensor> inputs,
                                  const Attributes& attributes) {
  return run_eager_impl(op, inputs, attributes, /*allow_decomposition=*/false);
}

}  // namespace tessera
