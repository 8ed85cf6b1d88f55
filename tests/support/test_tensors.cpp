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

namespace {

// ||got - want|| / ||want||, in double whatever `got` holds.
template <typename Values>
double relative_error_of(const Values& got, const std::vector<double>& want) {
  TESSERA_CHECK(got.size() == want.size(), "comparing {} values with {}", got.size(), want.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double value = got[i];
    if (!std::isfinite(value)) return INFINITY;
    diff += (value - want[i]) * (value - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

}  // namespace

double relative_error(const Tensor& got, const Tensor& want) {
  TESSERA_CHECK(got.sizes() == want.sizes(), "comparing {} with {}", got.str(), want.str());
  return relative_error_of(got.to_doubles(), want.to_doubles());
}

double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  return relative_error_of(got, want);
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
