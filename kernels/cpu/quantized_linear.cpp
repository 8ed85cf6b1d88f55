#include "kernels/cpu/quantized_linear.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/quant/block_format.h"
#include "runtime/cpu/parallel.h"

namespace tessera::cpu {
namespace {

// Output rows per chunk of a thread: a few rows' weights are enough work to be worth a hand-off.
constexpr int64_t kDotRowsPerChunk = 16;
// Weight rows dequantized at once for the GEMM: a tile of f32 that stays in the L2 cache.
constexpr int64_t kTileBytes = int64_t{1} << 20;

// x's rows as f32 (x itself when it already is).
std::vector<float> rows_as_f32(const Tensor& x, int64_t count) {
  std::vector<float> values(static_cast<size_t>(count));
  visit_float_dtype("linear", x.dtype(), [&]<typename T>() {
    const T* source = x.data<T>();
    for (int64_t i = 0; i < count; ++i) values[i] = static_cast<float>(source[i]);
  });
  return values;
}

// c[m, n] = x @ weight^T from dot products against the quantized activation rows.
void dot_rows(const float* x, int64_t m, int64_t k, const Tensor& weight, float* c) {
  const DType dtype = weight.dtype();
  const int64_t activation_blocks = k / quant::kActivationBlockElements;
  const int64_t activation_groups = k / quant::kActivationGroupElements;
  std::vector<int8_t> quants(static_cast<size_t>(m * k));
  std::vector<float> scales(static_cast<size_t>(m * activation_blocks));
  std::vector<int16_t> group_sums(static_cast<size_t>(m * activation_groups));
  for (int64_t row = 0; row < m; ++row)
    quant::quantize_activation(x + row * k, k, block_elements(dtype), quants.data() + row * k,
                               scales.data() + row * activation_blocks,
                               group_sums.data() + row * activation_groups);
  const int64_t n = weight.size(0);
  const int64_t weight_blocks = k / block_elements(dtype);
  const size_t row_bytes = static_cast<size_t>(storage_bytes(dtype, k));
  const auto* weight_data = static_cast<const std::byte*>(weight.data_ptr());
  const quant::RowDotFn vectorized = quant::vectorized_row_dot(dtype);
  parallel_for(n, kDotRowsPerChunk, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      const std::byte* weight_row = weight_data + j * row_bytes;
      for (int64_t row = 0; row < m; ++row) {
        const quant::ActivationRow x{quants.data() + row * k,
                                     scales.data() + row * activation_blocks,
                                     group_sums.data() + row * activation_groups};
        c[row * n + j] = vectorized != nullptr
                             ? vectorized(weight_row, x, weight_blocks)
                             : quant::portable_row_dot(dtype, weight_row, x, weight_blocks);
      }
    }
  });
}

// c[m, n] = x @ weight^T, a tile of weight rows dequantized at a time into f32 for the GEMM.
void dequantized_gemm(const float* x, int64_t m, int64_t k, const Tensor& weight, float* c) {
  const DType dtype = weight.dtype();
  const int64_t n = weight.size(0);
  const int64_t tile_rows = std::clamp<int64_t>(kTileBytes / (4 * k), 16, n);
  const int64_t row_blocks = k / block_elements(dtype);
  const size_t row_bytes = static_cast<size_t>(storage_bytes(dtype, k));
  const auto* weight_data = static_cast<const std::byte*>(weight.data_ptr());
  std::vector<float> tile(static_cast<size_t>(tile_rows * k));
  std::fill(c, c + m * n, 0.0f);
  const MatrixOperand a{x, DType::f32, k, 1};
  for (int64_t first = 0; first < n; first += tile_rows) {
    const int64_t rows = std::min(tile_rows, n - first);
    parallel_for(rows, 4, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        quant::dequantize_blocks(dtype, weight_data + (first + r) * row_bytes, tile.data() + r * k,
                                 row_blocks);
    });
    // b(kk, j) = tile[j, kk]: the tile's rows are b's columns.
    const MatrixOperand b{tile.data(), DType::f32, 1, k};
    gemm_accumulate(m, rows, k, a, b, c + first, n);
  }
}

}  // namespace

void quantized_linear(const Tensor& x, const Tensor& weight, const Tensor* bias,
                      const Tensor& out) {
  const int64_t k = weight.size(1), n = weight.size(0);
  const int64_t m = x.numel() / std::max<int64_t>(k, 1);
  std::vector<float> x_f32;
  const float* x_rows = x.dtype() == DType::f32 ? x.data<float>() : nullptr;
  if (x_rows == nullptr) {
    x_f32 = rows_as_f32(x, m * k);
    x_rows = x_f32.data();
  }
  std::vector<float> staging;
  float* c = out.dtype() == DType::f32 ? out.data<float>() : nullptr;
  if (c == nullptr) {
    staging.resize(static_cast<size_t>(m * n));
    c = staging.data();
  }
  if (m <= kQuantizedDotMaxRows) {
    dot_rows(x_rows, m, k, weight, c);
  } else {
    dequantized_gemm(x_rows, m, k, weight, c);
  }
  if (bias != nullptr) {
    visit_float_dtype("linear", bias->dtype(), [&]<typename T>() {
      const T* bias_data = bias->data<T>();
      for (int64_t row = 0; row < m; ++row)
        for (int64_t j = 0; j < n; ++j) c[row * n + j] += static_cast<float>(bias_data[j]);
    });
  }
  if (staging.empty()) return;
  visit_float_dtype("linear", out.dtype(), [&]<typename T>() {
    T* result = out.data<T>();
    for (int64_t i = 0; i < m * n; ++i) result[i] = T(staging[i]);
  });
}

void quantized_embedding(const Tensor& weight, const int64_t* rows, int64_t count,
                         const Tensor& out) {
  const DType dtype = weight.dtype();
  const int64_t width = weight.size(1);
  const int64_t row_blocks = width / block_elements(dtype);
  const size_t row_bytes = static_cast<size_t>(storage_bytes(dtype, width));
  const auto* table = static_cast<const std::byte*>(weight.data_ptr());
  float* result = out.data<float>();
  parallel_for(count, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* destination = result + i * width;
      if (rows[i] < 0) {
        std::fill(destination, destination + width, 0.0f);
        continue;
      }
      quant::dequantize_blocks(dtype, table + rows[i] * row_bytes, destination, row_blocks);
    }
  });
}

}  // namespace tessera::cpu
