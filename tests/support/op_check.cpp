#include "support/op_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>

#include "compile/ir/op_registry.h"
#include "compile/trace/dispatch.h"
#include "runtime/float8.h"
#include "runtime/tensor.h"
#include "support/reference.h"

namespace tessera::test {
namespace {

// ---------------------------------------------------------------------------------------------
// Tolerances

// Ops whose outputs are input values moved, selected or exactly converted: no rounding allowed.
bool is_exact_op(const std::string& op) {
  static const std::set<std::string> exact = {
      "neg",  "maximum", "where", "cast",      "max",        "argmax", "embedding",
      "view", "reshape", "slice", "transpose", "contiguous", "cat",
  };
  return exact.contains(op);
}

// Ops that sum many products: their rounding error scales with the sum of absolute terms.
// A gated activation fused into a linear (silu_and_mul_linear), and the experts' MLPs (fused_moe):
// they round the activation to the dtype before the product, as the two ops they replace do.
bool rounds_before_accumulating(const std::string& op) {
  return op.ends_with("_and_mul_linear") || op == "fused_moe";
}

bool is_accumulating_op(const std::string& op) {
  return op == "sum" || op == "mean" || op == "matmul" || op == "linear" || op == "fp8_linear" ||
         rounds_before_accumulating(op);
}

// The decomposition rounds every intermediate to the dtype, so it gets some slack.
constexpr double kDecompositionSlack = 4.0;
// Comparing two devices: both carry rounding error.
constexpr double kCrossDeviceSlack = 2.0;
// ||ref|| below this counts as this (all-tiny outputs are then judged absolutely).
constexpr double kReferenceNormFloor = 1e-6;

// ---------------------------------------------------------------------------------------------
// Inputs

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// An input drawn once on the host; materialized on any device with the spec's layout.
struct HostInput {
  InputSpec spec;
  std::vector<int64_t> storage_shape;
  std::vector<double> storage_values;  // rounded to the dtype
  RefTensor logical;                   // what the op sees
};

std::vector<int64_t> storage_shape_for(const InputSpec& spec) {
  std::vector<int64_t> shape = spec.shape;
  switch (spec.layout) {
    case Layout::contiguous:
      break;
    case Layout::transposed:
      if (shape.size() < 2)
        throw std::invalid_argument("layout 'transposed' needs an input of rank >= 2");
      std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
      break;
    case Layout::step_slice:
      if (shape.empty()) throw std::invalid_argument("layout 'step_slice' needs rank >= 1");
      shape.back() = 2 * shape.back() + 1;
      break;
    case Layout::broadcast_rows:
      if (shape.empty()) throw std::invalid_argument("layout 'broadcast_rows' needs rank >= 1");
      shape[0] = 1;
      break;
  }
  return shape;
}

double draw_value(const InputSpec& spec, std::mt19937_64& rng) {
  auto uniform = [&](double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng);
  };
  auto pick = [&](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(rng);
  };
  auto integer = [&](int64_t low, int64_t high) { return static_cast<double>(pick(low, high)); };
  auto random_sign = [&] { return pick(0, 1) == 0 ? -1.0 : 1.0; };
  bool floating = is_floating(spec.dtype);
  switch (spec.kind) {
    case ValueKind::general:
      return floating ? uniform(-2.0, 2.0) : integer(-100, 100);
    case ValueKind::positive:
      return floating ? uniform(0.1, 4.0) : integer(1, 100);
    case ValueKind::away_from_zero:
      return floating ? random_sign() * uniform(0.5, 2.0) : random_sign() * integer(1, 100);
    case ValueKind::wide:
      return floating ? random_sign() * std::pow(10.0, uniform(-6.0, 4.8)) : integer(-3000, 3000);
    case ValueKind::large:
      return floating ? uniform(-100.0, 100.0) : integer(-3000, 3000);
    case ValueKind::unit:
      return floating ? uniform(-1.0, 1.0) : integer(-1, 1);
    case ValueKind::ties: {
      static constexpr double kChoices[] = {-1.5, -0.5, 0.5, 1.5};
      return kChoices[pick(0, 3)];
    }
    case ValueKind::ids:
      if (spec.id_limit <= 0) throw std::invalid_argument("ids input without an id_limit");
      return integer(0, spec.id_limit - 1);
    case ValueKind::condition: {
      static constexpr double kTrue[] = {1, -1, 2, 7};
      return pick(0, 1) == 0 ? 0.0 : kTrue[pick(0, 3)];
    }
  }
  return 1.0;
}

Tensor make_storage(const HostInput& input, Device device) {
  if (input.spec.dtype == DType::f8_e4m3) {  // codes written directly: no host type converts
    Tensor codes = Tensor::empty(input.storage_shape, DType::f8_e4m3);
    auto* bytes = codes.data<uint8_t>();
    for (size_t i = 0; i < input.storage_values.size(); ++i)
      bytes[i] = Float8E4M3::from_float(static_cast<float>(input.storage_values[i]));
    return codes.to(device);
  }
  if (is_floating(input.spec.dtype)) {
    std::vector<float> values(input.storage_values.begin(), input.storage_values.end());
    return Tensor::from_floats(values, input.storage_shape, input.spec.dtype, device);
  }
  std::vector<int64_t> values(input.storage_values.size());
  std::transform(input.storage_values.begin(), input.storage_values.end(), values.begin(),
                 [](double value) { return static_cast<int64_t>(value); });
  return Tensor::from_ints(values, input.storage_shape, input.spec.dtype, device);
}

Tensor apply_layout(const Tensor& storage, const InputSpec& spec) {
  switch (spec.layout) {
    case Layout::contiguous:
      return storage;
    case Layout::transposed:
      return storage.transpose(-1, -2);
    case Layout::step_slice:
      return storage.slice(-1, 1, 1 + 2 * spec.shape.back(), 2);
    case Layout::broadcast_rows:
      return storage.expand(spec.shape);
  }
  return storage;
}

// The values a strided view shows, read from its storage's row-major values.
std::vector<double> gather_view(const Tensor& view, const std::vector<double>& storage_values) {
  std::vector<double> values(static_cast<size_t>(view.numel()));
  for (int64_t flat = 0; flat < view.numel(); ++flat) {
    std::vector<int64_t> index = unravel_index(flat, view.sizes());
    int64_t position = view.offset();
    for (size_t d = 0; d < index.size(); ++d) position += index[d] * view.strides()[d];
    values[flat] = storage_values.at(static_cast<size_t>(position));
  }
  return values;
}

HostInput draw_input(const InputSpec& spec, std::mt19937_64& rng) {
  HostInput input;
  input.spec = spec;
  input.storage_shape = storage_shape_for(spec);
  int64_t count = 1;
  for (int64_t size : input.storage_shape) count *= size;
  input.storage_values.resize(static_cast<size_t>(count));
  for (double& value : input.storage_values)
    value = round_to_dtype(draw_value(spec, rng), spec.dtype);
  // Build once on the host to learn the view's strides and check the tensor holds exactly the
  // rounded values (this also checks runtime/half.h against the independent rounding).
  Tensor storage = make_storage(input, kCPU);
  std::vector<double> stored;
  if (spec.dtype == DType::f8_e4m3) {
    for (int64_t i = 0; i < storage.numel(); ++i)
      stored.push_back(Float8E4M3::to_float(storage.data<uint8_t>()[i]));
  } else {
    stored = storage.to_doubles();
  }
  for (size_t i = 0; i < stored.size(); ++i) {
    if (stored[i] != input.storage_values[i]) {
      throw std::runtime_error(fmt::format(
          "input {}: the tensor holds {} where the value rounded to {} is {} (dtype conversion "
          "in runtime/half.h disagrees with the reference rounding)",
          spec.str(), stored[i], dtype_name(spec.dtype), input.storage_values[i]));
    }
  }
  Tensor view = apply_layout(storage, spec);
  if (view.sizes() != spec.shape)
    throw std::logic_error(
        fmt::format("layout of {} gives shape {}", spec.str(), shape_str(view.sizes())));
  input.logical.sizes = spec.shape;
  input.logical.values = gather_view(view, input.storage_values);
  return input;
}

std::vector<Tensor> materialize(const std::vector<HostInput>& inputs, Device device) {
  std::vector<Tensor> tensors;
  for (const HostInput& input : inputs)
    tensors.push_back(apply_layout(make_storage(input, device), input.spec));
  return tensors;
}

DType expected_output_dtype(const OpSample& sample, const Attributes& attributes) {
  const std::string& op = sample.reference_name();
  if (op == "argmax") return DType::i64;
  if (op == "moe_routing") return DType::f32;
  if (op == "cast") return attributes.get_dtype("dtype");
  if (op == "where" || op == "rotary_embedding") return sample.inputs.at(1).dtype;
  return sample.inputs.at(0).dtype;
}

// ---------------------------------------------------------------------------------------------
// Comparison

std::string format_index(int64_t flat, const std::vector<int64_t>& sizes) {
  return shape_str(unravel_index(flat, sizes));
}

// Compares `outputs` with `expected`; `magnitudes` (the reference on |inputs|) widens the bound
// of accumulating ops.
Comparison compare(const std::string& path, const std::vector<Tensor>& outputs,
                   const std::vector<RefTensor>& expected, const std::vector<RefTensor>& magnitudes,
                   DType expected_dtype, const Tolerance& tolerance) {
  Comparison result;
  result.path = path;
  std::vector<std::string> problems;
  if (outputs.size() != expected.size()) {
    result.message = fmt::format("{} outputs, expected {}", outputs.size(), expected.size());
    return result;
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& out = outputs[o];
    const RefTensor& ref = expected[o];
    std::string label = outputs.size() > 1 ? fmt::format("output {}: ", o) : "";
    if (!out.defined()) {
      problems.push_back(label + "undefined output tensor");
      continue;
    }
    if (out.sizes() != ref.sizes) {
      problems.push_back(fmt::format("{}shape {}, expected {}", label, shape_str(out.sizes()),
                                     shape_str(ref.sizes)));
      continue;
    }
    if (out.dtype() != expected_dtype) {
      problems.push_back(fmt::format("{}dtype {}, expected {}", label, dtype_name(out.dtype()),
                                     dtype_name(expected_dtype)));
    }
    std::vector<double> values = out.to_doubles();
    const std::vector<double>* magnitude = o < magnitudes.size() ? &magnitudes[o].values : nullptr;
    double diff_squares = 0, ref_squares = 0, magnitude_squares = 0;
    int64_t failing = 0;
    std::vector<std::string> examples;
    for (size_t i = 0; i < values.size(); ++i) {
      double got = values[i];
      double want = ref.values[i];
      double mag = magnitude ? (*magnitude)[i] : 0.0;
      double bound = tolerance.atol + tolerance.rtol * std::fabs(want) +
                     tolerance.accumulation_rtol * std::fabs(mag);
      bool ok;
      double diff;
      if (std::isnan(got) || std::isnan(want)) {
        ok = false;
        diff = NAN;
      } else if (std::isinf(got) || std::isinf(want)) {
        ok = got == want;
        diff = ok ? 0.0 : INFINITY;
      } else {
        diff = std::fabs(got - want);
        ok = diff <= bound;
        double ratio = bound > 0 ? diff / bound : (diff > 0 ? INFINITY : 0.0);
        result.worst_bound_ratio = std::max(result.worst_bound_ratio, ratio);
        diff_squares += diff * diff;
        ref_squares += want * want;
        magnitude_squares += mag * mag;
      }
      if (!std::isnan(diff))
        result.max_abs_error = std::max(result.max_abs_error, diff);
      else
        result.max_abs_error = NAN;
      if (!ok) {
        ++failing;
        if (examples.size() < 4) {
          examples.push_back(fmt::format(
              "at {} got {:.9g}, expected {:.9g} (|diff| {:.3g} > {:.3g})",
              format_index(static_cast<int64_t>(i), ref.sizes), got, want, diff, bound));
        }
      }
    }
    result.checked_elements += static_cast<int64_t>(values.size());
    result.failing_elements += failing;
    double ref_norm = std::max(std::sqrt(ref_squares), kReferenceNormFloor);
    double relative = std::sqrt(diff_squares) / ref_norm;
    double relative_limit = tolerance.max_relative_error +
                            tolerance.accumulation_rtol * std::sqrt(magnitude_squares) / ref_norm;
    result.relative_error = std::max(result.relative_error, relative);
    if (failing > 0) {
      problems.push_back(fmt::format("{}{} of {} elements out of tolerance; {}", label, failing,
                                     values.size(), fmt::join(examples, "; ")));
    }
    if (relative > relative_limit) {
      problems.push_back(
          fmt::format("{}relative error {:.3g} exceeds {:.3g}", label, relative, relative_limit));
    }
  }
  result.passed = problems.empty();
  if (!result.passed) {
    result.message = fmt::format("{} [tolerance {}]", fmt::join(problems, "; "), tolerance.str());
  }
  return result;
}

Comparison failed_path(const std::string& path, const std::string& message) {
  Comparison result;
  result.path = path;
  result.message = message;
  return result;
}

std::vector<RefTensor> absolute(const std::vector<HostInput>& inputs) {
  std::vector<RefTensor> out;
  for (const HostInput& input : inputs) {
    RefTensor tensor = input.logical;
    for (double& value : tensor.values) value = std::fabs(value);
    out.push_back(std::move(tensor));
  }
  return out;
}

}  // namespace

Tolerance Tolerance::scaled(double factor) const {
  return Tolerance{rtol * factor, atol * factor, accumulation_rtol * factor,
                   max_relative_error * factor};
}

std::string Tolerance::str() const {
  if (exact()) return "exact";
  return fmt::format("rtol {:.2g}, atol {:.2g}, accumulation rtol {:.2g}, relative {:.2g}", rtol,
                     atol, accumulation_rtol, max_relative_error);
}

Tolerance tolerance_for(const std::string& op, DType output_dtype, double scale) {
  if (is_exact_op(op) || !is_floating(output_dtype)) return Tolerance{};
  Tolerance tolerance;
  switch (output_dtype) {
    case DType::f16:
      tolerance = {1e-3, 1e-3, 0, 1e-3};
      break;
    case DType::bf16:
      tolerance = {1e-2, 1e-2, 0, 1e-2};
      break;
    default:
      tolerance = {1e-5, 1e-5, 0, 1e-5};
      break;
  }
  // Kernels accumulate in f32 whatever the dtype.
  if (is_accumulating_op(op)) tolerance.accumulation_rtol = 1e-5;
  // Every term may carry the rounding of its rounded operand: the dtype's relative error times
  // the sum of the terms' magnitudes (the reference on absolute inputs bounds it: |act(x)| <=
  // act(|x|) for silu and gelu).
  if (rounds_before_accumulating(op)) tolerance.accumulation_rtol = tolerance.rtol;
  // FP8 tensor cores sum the e4m3 products in a narrower accumulator between promotions to f32.
  if (op == "fp8_linear") tolerance.accumulation_rtol = 1e-4;
  return tolerance.scaled(scale);
}

CaseResult check_op_sample(const OpSample& sample, Device device, const CheckOptions& options) {
  CaseResult result;
  result.case_name = sample.name();
  result.device = device.str();
  const std::string& reference_name = sample.reference_name();
  auto finish = [&]() -> CaseResult {
    std::vector<std::string> failures;
    for (const Comparison& comparison : result.comparisons)
      if (!comparison.passed) failures.push_back(comparison.path + ": " + comparison.message);
    result.passed = failures.empty() && !result.comparisons.empty();
    if (!result.passed) {
      result.message = fmt::format("FAILED {} on {}\n    {}", result.case_name, result.device,
                                   fmt::join(failures, "\n    "));
    }
    return result;
  };

  const OpDef* op = OpRegistry::global().find(sample.op);
  if (op == nullptr) {
    result.comparisons.push_back(
        failed_path("setup", fmt::format("op '{}' is not registered", sample.op)));
    return finish();
  }

  std::vector<HostInput> host_inputs;
  std::vector<RefTensor> expected, magnitudes;
  Attributes attributes;
  DType output_dtype = DType::f32;
  try {
    std::mt19937_64 rng(fnv1a(result.case_name) ^ options.seed);
    for (const InputSpec& spec : sample.inputs) host_inputs.push_back(draw_input(spec, rng));
    attributes = complete_attributes(*op, sample.attributes);
    std::vector<RefTensor> logical;
    for (const HostInput& input : host_inputs) logical.push_back(input.logical);
    expected = reference_op(reference_name, logical, attributes);
    if (is_accumulating_op(reference_name)) {
      std::vector<RefTensor> absolute_inputs = absolute(host_inputs);
      // fused_moe's bound is over the experts the signed router logits choose.
      if (reference_name == "fused_moe") absolute_inputs.at(1) = logical.at(1);
      magnitudes = reference_op(reference_name, absolute_inputs, attributes);
    }
    output_dtype = expected_output_dtype(sample, attributes);
  } catch (const std::exception& error) {
    result.comparisons.push_back(failed_path("setup", error.what()));
    return finish();
  }
  Tolerance tolerance = tolerance_for(reference_name, output_dtype, sample.tolerance_scale);
  std::string device_name = device.str();

  std::optional<std::vector<Tensor>> device_outputs;
  try {
    device_outputs = run_kernel_of(*op, materialize(host_inputs, device), attributes);
    result.comparisons.push_back(compare(device_name + " kernel vs reference", *device_outputs,
                                         expected, magnitudes, output_dtype, tolerance));
  } catch (const std::exception& error) {
    result.comparisons.push_back(
        failed_path(device_name + " kernel", fmt::format("threw: {}", error.what())));
  }

  if (options.check_decomposition && op->decompose) {
    try {
      std::vector<Tensor> outputs = op->decompose(materialize(host_inputs, device), attributes);
      result.comparisons.push_back(compare(device_name + " decomposition vs reference", outputs,
                                           expected, magnitudes, output_dtype,
                                           tolerance.scaled(kDecompositionSlack)));
    } catch (const std::exception& error) {
      result.comparisons.push_back(
          failed_path(device_name + " decomposition", fmt::format("threw: {}", error.what())));
    }
  }

  if (options.compare_with_cpu_kernel && !device.is_cpu() && device_outputs) {
    try {
      std::vector<Tensor> cpu_outputs =
          run_kernel_of(*op, materialize(host_inputs, kCPU), attributes);
      std::vector<RefTensor> cpu_values;
      for (const Tensor& output : cpu_outputs)
        cpu_values.push_back(RefTensor{output.sizes(), output.to_doubles()});
      result.comparisons.push_back(compare(device_name + " kernel vs cpu kernel", *device_outputs,
                                           cpu_values, magnitudes, output_dtype,
                                           tolerance.scaled(kCrossDeviceSlack)));
    } catch (const std::exception& error) {
      result.comparisons.push_back(
          failed_path("cpu kernel (for comparison)", fmt::format("threw: {}", error.what())));
    }
  }
  return finish();
}

}  // namespace tessera::test
