// Runs one op sample on one device and compares every path (the device kernel, the op's
// decomposition, and on a GPU the CPU kernel) with the float64 reference.
//
// Inputs are random (seeded by the case name, so every case is reproducible on its own), built
// in float and rounded through the input dtype, so the reference sees exactly what the kernel
// sees. Outputs are compared in full: an element a kernel forgets to write holds whatever the
// allocator returned, which does not match random data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "support/op_samples.h"

namespace tessera::test {

// An element passes when |out - ref| <= atol + rtol * |ref| + accumulation_rtol * magnitude,
// where magnitude is the reference run on |inputs| (nonzero only for sums and products, whose
// rounding error scales with the sum of absolute terms rather than with the result). The whole
// output passes when every element does and ||out - ref|| / ||ref|| <= max_relative_error
// (plus the accumulation allowance). NaN never passes; infinities must match exactly.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
  double accumulation_rtol = 0;
  double max_relative_error = 0;

  bool exact() const { return rtol == 0 && atol == 0 && accumulation_rtol == 0; }
  Tolerance scaled(double factor) const;
  std::string str() const;
};

// Outputs of ops that only move or select values, casts and integer outputs are exact; float
// outputs get the dtype's tolerance (f32 1e-5, f16 1e-3, bf16 1e-2) times `scale`.
Tolerance tolerance_for(const std::string& op, DType output_dtype, double scale = 1.0);

struct Comparison {
  std::string path;  // "cpu kernel vs reference", "cuda:0 decomposition vs reference", ...
  bool passed = false;
  double relative_error = 0;
  double max_abs_error = 0;
  double worst_bound_ratio = 0;  // max over elements of |out - ref| / bound (> 1 fails)
  int64_t checked_elements = 0;
  int64_t failing_elements = 0;
  std::string message;  // what went wrong; empty when passed
};

struct CaseResult {
  std::string case_name;  // op, shapes, dtypes, layouts, attributes
  std::string device;
  bool passed = false;
  std::vector<Comparison> comparisons;
  std::string message;  // every failing comparison, readable; empty when passed
};

struct CheckOptions {
  uint64_t seed = 20240611;              // mixed with the case name
  bool check_decomposition = true;       // also run op.decompose when the op has one
  bool compare_with_cpu_kernel = false;  // on another device: also compare with the CPU kernel
};

CaseResult check_op_sample(const OpSample& sample, Device device, const CheckOptions& options = {});

}  // namespace tessera::test
