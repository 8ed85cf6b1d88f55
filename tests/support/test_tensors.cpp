#include "support/test_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "kernels/quant/block_format.h"
#include "runtime/check.h"
#include "runtime/half.h"

#include <unistd.h>

namespace tessera::testing {

Tensor random_tensor(Shape sizes, uint32_t seed, DType dtype, Device device) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> values(static_cast<size_t>(shape_numel(sizes)));
  for (float& v : values) v = dist(rng);
  return Tensor::from_floats(values, std::move(sizes), dtype, device);
}

Tensor random_quantized(DType dtype, Shape sizes, uint32_t seed) {
  std::mt19937 random(seed);
  Tensor weight = Tensor::empty(std::move(sizes), dtype);
  auto* bytes = static_cast<uint8_t*>(weight.data_ptr());
  for (size_t i = 0; i < weight.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(random());
  // Every format's f16 fields sit at these offsets of a block (d, and dmin or m; see
  // kernels/quant).
  const std::vector<size_t> offsets = dtype == DType::q2_k   ? std::vector<size_t>{80, 82}
                                      : dtype == DType::q3_k ? std::vector<size_t>{108}
                                      : dtype == DType::q6_k ? std::vector<size_t>{208}
                                      : (dtype == DType::q4_1 || dtype == DType::q5_1 ||
                                         dtype == DType::q4_k || dtype == DType::q5_k)
                                          ? std::vector<size_t>{0, 2}
                                          : std::vector<size_t>{0};
  std::uniform_real_distribution<float> scale(0.001f, 0.03f);
  const auto blocks = static_cast<int64_t>(weight.nbytes() / block_bytes(dtype));
  for (int64_t b = 0; b < blocks; ++b)
    for (size_t offset : offsets) {
      const uint16_t bits = Half(scale(random)).bits;
      std::memcpy(bytes + b * block_bytes(dtype) + offset, &bits, 2);
    }
  return weight;
}

Tensor dequantized(const Tensor& quantized) {
  const Tensor host = quantized.to(kCPU).contiguous();
  Tensor values = Tensor::empty(host.sizes(), DType::f32);
  quant::dequantize_blocks(host.dtype(), static_cast<const std::byte*>(host.data_ptr()),
                           values.data<float>(), host.numel() / block_elements(host.dtype()));
  return values;
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
