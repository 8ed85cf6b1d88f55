// Op conformance (the llama.cpp test-backend-ops idea): every registered op, on random inputs of
// several shapes, dtypes and layouts, is compared with a float64 reference on every device; GPU
// kernels are also compared with the CPU kernels, and decompositions with the reference.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "compile/ir/op_registry.h"
#include "runtime/backend/backend.h"
#include "runtime/kernel_registry.h"
#include "support/op_check.h"
#include "support/op_samples.h"

namespace tessera {
namespace {

using test::CaseResult;
using test::CheckOptions;
using test::InputSpec;
using test::Layout;
using test::OpSample;

// ---------------------------------------------------------------------------------------------
// Test-only ops for the checker's self-test: each claims exp's semantics; one is right, the
// others are wrong in ways a loose checker would miss.

std::vector<TensorMeta> same_as_input(const MetaArgs& args) {
  return {args.input(0)};
}

OpDef exp_like_op(const std::string& name, bool strided_inputs) {
  OpDef op;
  op.name = name;
  op.input_names = {"x"};
  op.strided_inputs = strided_inputs;
  op.meta = same_as_input;
  op.doc = "conformance checker self-test (f32 only)";
  return op;
}

// Reads the input element at a row-major index through its strides.
float read_strided(const Tensor& x, int64_t flat) {
  int64_t position = 0;
  for (int64_t d = x.dim(); d-- > 0;) {
    position += (flat % x.size(d)) * x.stride(d);
    flat /= x.size(d);
  }
  return x.data<float>()[position];
}

void correct_exp_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  float* out = args.outputs[0].data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = std::exp(read_strided(x, i));
}

// Off by 1e-3 in one element of a large tensor: far below what a norm-wise check notices.
void one_element_off_kernel(const KernelArgs& args) {
  correct_exp_kernel(args);
  float* out = args.outputs[0].data<float>();
  out[args.outputs[0].numel() / 2] += 1e-3f;
}

// Forgets the last element (a classic tail bug).
void skips_last_element_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  float* out = args.outputs[0].data<float>();
  for (int64_t i = 0; i + 1 < x.numel(); ++i) out[i] = std::exp(read_strided(x, i));
}

// Reads its (strided_inputs) input as if it were contiguous.
void ignores_strides_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  float* out = args.outputs[0].data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = std::exp(x.data<float>()[i]);
}

TESSERA_REGISTER_OP(exp_like_op("test_only_correct_exp", true));
TESSERA_REGISTER_OP(exp_like_op("test_only_one_element_off_exp", false));
TESSERA_REGISTER_OP(exp_like_op("test_only_skips_last_element_exp", false));
TESSERA_REGISTER_OP(exp_like_op("test_only_ignores_strides_exp", true));
TESSERA_REGISTER_KERNEL("test_only_correct_exp", DeviceType::cpu, correct_exp_kernel);
TESSERA_REGISTER_KERNEL("test_only_one_element_off_exp", DeviceType::cpu, one_element_off_kernel);
TESSERA_REGISTER_KERNEL("test_only_skips_last_element_exp", DeviceType::cpu,
                        skips_last_element_kernel);
TESSERA_REGISTER_KERNEL("test_only_ignores_strides_exp", DeviceType::cpu, ignores_strides_kernel);

OpSample exp_sample(const std::string& op, std::vector<int64_t> shape,
                    Layout layout = Layout::contiguous) {
  OpSample sample;
  sample.op = op;
  sample.reference_op = "exp";
  InputSpec input;
  input.shape = std::move(shape);
  input.dtype = DType::f32;
  input.layout = layout;
  sample.inputs = {input};
  return sample;
}

// ---------------------------------------------------------------------------------------------

struct RunSummary {
  int passed = 0;
  int failed = 0;
  std::map<std::string, std::pair<int, int>> by_op;  // op -> (failed, total)
};

// Runs every sample on `device`, reporting each failing case as its own test failure.
RunSummary run_every_sample(Device device, const CheckOptions& options) {
  RunSummary summary;
  for (const OpSample& sample : test::all_op_samples()) {
    CaseResult result = test::check_op_sample(sample, device, options);
    auto& [op_failed, op_total] = summary.by_op[sample.op];
    ++op_total;
    if (result.passed) {
      ++summary.passed;
    } else {
      ++summary.failed;
      ++op_failed;
      ADD_FAILURE() << result.message;
    }
  }
  std::vector<std::string> failing_ops;
  for (const auto& [op, counts] : summary.by_op)
    if (counts.first > 0)
      failing_ops.push_back(fmt::format("{} ({}/{})", op, counts.first, counts.second));
  fmt::print("op conformance on {}: {} cases, {} passed, {} failed{}{}\n", device.str(),
             summary.passed + summary.failed, summary.passed, summary.failed,
             failing_ops.empty() ? "" : "; failing ops: ", fmt::join(failing_ops, ", "));
  return summary;
}

TEST(OpConformance, EveryOpHasSamples) {
  std::vector<std::string> missing;
  for (const OpDef* op : OpRegistry::global().all()) {
    if (test::is_test_only_op(op->name) || test::ops_tested_elsewhere().contains(op->name))
      continue;
    if (test::op_samples(op->name).empty()) missing.push_back(op->name);
  }
  EXPECT_TRUE(missing.empty())
      << "registered ops without conformance samples (add them to tests/support/op_samples.cpp "
         "and their float64 reference to tests/support/reference.cpp): "
      << fmt::format("{}", fmt::join(missing, ", "));
}

TEST(OpConformance, CpuKernelsMatchReference) {
  RunSummary summary = run_every_sample(kCPU, CheckOptions{});
  EXPECT_GT(summary.passed + summary.failed, 0);
  EXPECT_EQ(summary.failed, 0);
}

TEST(GpuOpConformance, KernelsMatchReference) {
  Device gpu;
  if (!first_gpu(&gpu))
    GTEST_SKIP() << "no GPU device available (needs a CUDA or HIP build and a device)";
  CheckOptions options;
  options.compare_with_cpu_kernel = true;
  RunSummary summary = run_every_sample(gpu, options);
  EXPECT_GT(summary.passed + summary.failed, 0);
  EXPECT_EQ(summary.failed, 0);
}

TEST(OpConformance, DetectsABrokenKernel) {
  // The control: a correct kernel passes the same checks (contiguous and strided).
  for (Layout layout : {Layout::contiguous, Layout::transposed, Layout::step_slice}) {
    CaseResult control =
        test::check_op_sample(exp_sample("test_only_correct_exp", {5, 4097}, layout), kCPU);
    EXPECT_TRUE(control.passed) << control.message;
  }

  CaseResult off =
      test::check_op_sample(exp_sample("test_only_one_element_off_exp", {5, 4097}), kCPU);
  EXPECT_FALSE(off.passed) << "a 1e-3 error in one of 20485 elements went unnoticed";
  EXPECT_NE(off.message.find("1 of 20485 elements out of tolerance"), std::string::npos)
      << off.message;

  CaseResult skipped =
      test::check_op_sample(exp_sample("test_only_skips_last_element_exp", {3, 4097}), kCPU);
  EXPECT_FALSE(skipped.passed) << "an unwritten last element went unnoticed";
  EXPECT_NE(skipped.message.find("[2, 4096]"), std::string::npos) << skipped.message;

  CaseResult contiguous =
      test::check_op_sample(exp_sample("test_only_ignores_strides_exp", {3, 5}), kCPU);
  EXPECT_TRUE(contiguous.passed) << contiguous.message;
  CaseResult transposed = test::check_op_sample(
      exp_sample("test_only_ignores_strides_exp", {3, 5}, Layout::transposed), kCPU);
  EXPECT_FALSE(transposed.passed) << "a kernel ignoring its input strides went unnoticed";

  // A sample of an op that is not registered fails instead of passing vacuously.
  CaseResult unknown = test::check_op_sample(exp_sample("test_only_not_registered", {3}), kCPU);
  EXPECT_FALSE(unknown.passed);
  EXPECT_NE(unknown.message.find("not registered"), std::string::npos) << unknown.message;
}

}  // namespace
}  // namespace tessera
