#include "support/test_tensors.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "runtime/check.h"

#include <unistd.h>

namespace tessera::testing {

Tensor random_tensor(Shape sizes, uint32_t seed, DType dtype, Device device) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> values(static_cast<size_t>(shape_numel(sizes)));
  for (float& v : values) v = dist(rng);
  return Tensor::from_floats(values, std::move(sizes), dtype, device);
}

double relative_error(const Tensor& got, const Tensor& want) {
  TESSERA_CHECK(got.sizes() == want.sizes(), "comparing {} with {}", got.str(), want.str());
  std::vector<double> a = got.to_doubles();
  return relative_error(std::vector<float>(a.begin(), a.end()), want.to_doubles());
}

double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  TESSERA_CHECK(a.size() == b.size(), "comparing {} values with {}", a.size(), b.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  TESSERA_CHECK(a.sizes() == b.sizes(), "comparing {} with {}", a.str(), b.str());
  std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

std::string fresh_temp_dir(const std::string& name) {
  auto path =
      std::filesystem::temp_directory_path() / fmt::format("tessera_test_{}_{}", name, getpid());
  std::filesystem::remove_all(path);
  return path.string();
}

}  // namespace tessera::testing
