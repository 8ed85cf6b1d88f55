// The float64 references of the matrix products: matmul, linear and fp8_linear.
#include <algorithm>
#include <cmath>

#include "support/reference.h"
#include "support/reference_detail.h"

namespace tessera::test::reference_detail {

RefTensor reference_matmul(const RefTensor& a, const RefTensor& b) {
  require(rank_of(a) >= 2 && rank_of(b) >= 2, "matmul needs a and b of rank >= 2");
  int64_t m = a.sizes[a.sizes.size() - 2];
  int64_t k = a.sizes.back();
  int64_t n = b.sizes.back();
  require(b.sizes[b.sizes.size() - 2] == k, "matmul inner sizes differ");
  Sizes batch_sizes(a.sizes.begin(), a.sizes.end() - 2);
  bool shared_b = rank_of(b) == 2;
  if (!shared_b)
    require(Sizes(b.sizes.begin(), b.sizes.end() - 2) == batch_sizes,
            "matmul batch sizes of a and b differ");
  int64_t batches = count_elements(batch_sizes);
  Sizes out_sizes = batch_sizes;
  out_sizes.push_back(m);
  out_sizes.push_back(n);
  RefTensor out = make_tensor(out_sizes);
  for (int64_t batch = 0; batch < batches; ++batch) {
    const double* a_matrix = a.values.data() + batch * m * k;
    const double* b_matrix = b.values.data() + (shared_b ? 0 : batch * k * n);
    double* out_matrix = out.values.data() + batch * m * n;
    for (int64_t row = 0; row < m; ++row) {
      for (int64_t column = 0; column < n; ++column) {
        double total = 0;
        for (int64_t i = 0; i < k; ++i) total += a_matrix[row * k + i] * b_matrix[i * n + column];
        out_matrix[row * n + column] = total;
      }
    }
  }
  return out;
}

RefTensor reference_linear(std::span<const RefTensor> inputs) {
  require(inputs.size() == 2 || inputs.size() == 3, "linear takes x, weight and optional bias");
  const RefTensor& x = inputs[0];
  const RefTensor& weight = inputs[1];
  require(rank_of(x) >= 1 && rank_of(weight) == 2, "linear needs x [..., K] and weight [N, K]");
  int64_t k = x.sizes.back();
  int64_t n = weight.sizes[0];
  require(weight.sizes[1] == k, "linear: weight's K differs from x's");
  const RefTensor* bias = inputs.size() == 3 ? &inputs[2] : nullptr;
  if (bias) require(bias->sizes == Sizes{n}, "linear: bias must be [N]");
  Sizes out_sizes = x.sizes;
  out_sizes.back() = n;
  RefTensor out = make_tensor(out_sizes);
  int64_t rows = 1;  // every dim but the last: K may be 0, then each output is the bias
  for (size_t d = 0; d + 1 < x.sizes.size(); ++d) rows *= x.sizes[d];
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t column = 0; column < n; ++column) {
      double total = bias ? bias->values[column] : 0.0;
      for (int64_t i = 0; i < k; ++i)
        total += x.values[row * k + i] * weight.values[column * k + i];
      out.values[row * n + column] = total;
    }
  }
  return out;
}

// fp8_linear (kernels/quant/fp8_scaling.h): x quantized to e4m3 by f32 scales computed as the
// definition states (amax / 448, inverse 448 / amax, or the fixed input_scale), the weight's codes
// times its scales per channel [N] or per 128 x 128 block, the products summed in float64.
RefTensor reference_fp8_linear(std::span<const RefTensor> inputs, const std::string& activation) {
  require(inputs.size() == 3 || inputs.size() == 4, "fp8_linear takes x, weight, weight_scale");
  const RefTensor& x = inputs[0];
  const RefTensor& weight = inputs[1];
  const RefTensor& scale = inputs[2];
  const int64_t k = x.sizes.back(), n = weight.sizes[0], block = 128;
  const int64_t column_blocks = (k + block - 1) / block;
  const bool block_scaled = rank_of(scale) == 2;
  const int64_t group = activation == "group" ? block : k;
  Sizes out_sizes = x.sizes;
  out_sizes.back() = n;
  RefTensor out = make_tensor(out_sizes);
  const int64_t rows = x.numel() / std::max<int64_t>(k, 1);
  std::vector<double> quantized(static_cast<size_t>(k));
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t first = 0; first < k; first += group) {
      const int64_t count = std::min(group, k - first);
      float amax = 0;
      for (int64_t i = 0; i < count; ++i)
        amax = std::max(amax, static_cast<float>(std::fabs(x.values[row * k + first + i])));
      // The floor of kernels/quant/fp8_scaling.h: 1 / (448 * 512).
      const float floor_scale = 1.0f / (448.0f * 512.0f);
      float x_scale = amax > 448.0f * floor_scale ? amax / 448.0f : floor_scale;
      float inverse = amax > 448.0f * floor_scale ? 448.0f / amax : 1.0f / floor_scale;
      if (activation == "fixed") {
        x_scale = static_cast<float>(inputs[3].values[0]);
        inverse = 1.0f / x_scale;
      }
      for (int64_t i = 0; i < count; ++i) {
        const float product = static_cast<float>(x.values[row * k + first + i]) * inverse;
        quantized[first + i] = round_to_dtype(product, DType::f8_e4m3) * x_scale;
      }
    }
    for (int64_t column = 0; column < n; ++column) {
      double total = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double weight_scale = block_scaled
                                        ? scale.values[(column / block) * column_blocks + i / block]
                                        : scale.values[column];
        total += quantized[i] * weight.values[column * k + i] * weight_scale;
      }
      out.values[row * n + column] = total;
    }
  }
  return out;
}

}  // namespace tessera::test::reference_detail
