#include "models/linear_weight.h"

#include "compile/ops/ops.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// Rows of the parts' tensors stacked on their device, bytes copied (no kernel there has to
// know the format).
Tensor stack_rows(const std::vector<const Tensor*>& parts) {
  Shape sizes = parts.front()->sizes();
  sizes[0] = 0;
  for (const Tensor* part : parts) sizes[0] += part->size(0);
  Tensor stacked = Tensor::empty(sizes, parts.front()->dtype(), parts.front()->device());
  int64_t first = 0;
  for (const Tensor* part : parts) {
    stacked.slice(0, first, first + part->size(0)).copy_from(*part);
    first += part->size(0);
  }
  return stacked;
}

// Whether FP8 parts can share one GEMM: one scale layout, whole blocks of rows before the last
// part where scales are per block, and one fixed input scale.
bool fp8_stackable(const std::vector<LinearWeight>& parts) {
  const LinearWeight& first = parts.front();
  for (size_t i = 0; i < parts.size(); ++i) {
    const LinearWeight& part = parts[i];
    if (part.weight_scale.dim() != first.weight_scale.dim() || part.activation != first.activation)
      return false;
    if (part.weight_scale.dim() == 2 && i + 1 < parts.size() && part.weight.size(0) % kFp8Block)
      return false;
    if (part.input_scale.defined() && part.input_scale.to_floats() != first.input_scale.to_floats())
      return false;
  }
  return true;
}

}  // namespace

Tensor LinearWeight::apply(const Tensor& x, const Tensor& bias) const {
  if (!is_fp8()) return bias.defined() ? ops::linear(x, weight, bias) : ops::linear(x, weight);
  std::optional<Tensor> fixed;
  if (input_scale.defined()) fixed = input_scale;
  Tensor out =
      ops::fp8_linear(x, weight, weight_scale, fp8_activation_scale_name(activation), fixed);
  return bias.defined() ? ops::add(out, bias) : out;
}

std::vector<const Tensor*> LinearWeight::tensors() const {
  return {&weight, &weight_scale, &input_scale};
}

std::string projection_module(const std::string& weight_name) {
  constexpr std::string_view kSuffix = ".weight";
  TESSERA_CHECK(weight_name.ends_with(kSuffix), "projection weight {} without .weight",
                weight_name);
  return weight_name.substr(0, weight_name.size() - kSuffix.size());
}

LinearWeight linear_weight(const ModelWeights& weights, const std::string& weight_name) {
  LinearWeight linear;
  linear.weight = weights.get(weight_name);
  if (!linear.is_fp8()) return linear;
  const std::string module = projection_module(weight_name);
  linear.weight_scale = weights.get(module + ".weight_scale");
  linear.activation = weights.config.fp8.activation;
  if (linear.activation == Fp8ActivationScale::fixed)
    linear.input_scale = weights.get(module + ".input_scale");
  return linear;
}

StackedLinear stack_linear(std::vector<LinearWeight> parts) {
  TESSERA_CHECK(!parts.empty(), "stack_linear of no weights");
  StackedLinear linear;
  bool agree = true;
  for (const LinearWeight& part : parts)
    agree &= part.weight.dtype() == parts.front().weight.dtype();
  if (agree && parts.front().is_fp8()) agree = fp8_stackable(parts);
  if (!agree) {
    linear.parts = std::move(parts);
    return linear;
  }
  std::vector<const Tensor*> weights, scales;
  for (const LinearWeight& part : parts) {
    weights.push_back(&part.weight);
    scales.push_back(&part.weight_scale);
  }
  linear.stacked = parts.front();
  linear.stacked.weight = stack_rows(weights);
  if (parts.front().is_fp8()) linear.stacked.weight_scale = stack_rows(scales);
  return linear;
}

Tensor StackedLinear::apply(const Tensor& x, const Tensor& bias) const {
  if (stacked.weight.defined()) return stacked.apply(x, bias);
  std::vector<Tensor> outputs;
  for (const LinearWeight& part : parts) outputs.push_back(part.apply(x));
  Tensor joined = ops::cat(outputs, -1);
  return bias.defined() ? ops::add(joined, bias) : joined;
}

std::vector<const Tensor*> StackedLinear::tensors() const {
  std::vector<const Tensor*> held = stacked.tensors();
  for (const LinearWeight& part : parts)
    for (const Tensor* tensor : part.tensors()) held.push_back(tensor);
  return held;
}

}  // namespace tessera
