// Small tensor helpers shared by the tests: seeded random data (never zeros) and comparisons.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace tessera::testing {

// Uniform in [-2, 2), rounded through `dtype`, on `device`.
Tensor random_tensor(Shape sizes, uint32_t seed, DType dtype = DType::f32, Device device = kCPU);
// ||got - want|| / ||want|| over all elements (infinity when `got` holds a NaN or inf).
double relative_error(const Tensor& got, const Tensor& want);
double relative_error(const std::vector<float>& got, const std::vector<double>& want);
double max_abs_difference(const Tensor& a, const Tensor& b);
// An empty directory under the system's temp dir, unique to this process and `name`.
std::string fresh_temp_dir(const std::string& name);

}  // namespace tessera::testing
