// fp8_linear on the CPU: x quantized to e4m3 by its scales and expanded back to f32, weight rows
// expanded a tile at a time (code times scale), then the f32 GEMM. The arithmetic is
// kernels/quant/fp8_scaling.h's; each product is scaled before the sum instead of each group's
// sum after it, which differs only by f32 rounding.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/cpu/parallel.h"
#include "runtime/float8.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

// Weight rows expanded at once for the GEMM: a tile of f32 that stays in the L2 cache.
constexpr int64_t kTileBytes = int64_t{1} << 20;

const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> values = [] {
    std::array<float, 256> table{};
    for (int code = 0; code < 256; ++code)
      table[code] = Float8E4M3::to_float(static_cast<uint8_t>(code));
    return table;
  }();
  return values;
}

// x's rows quantized to e4m3 by `args.activation` and expanded back: code times scale.
std::vector<float> quantized_x(const Fp8LinearArgs& args) {
  const int64_t m = args.m, k = args.k;
  std::vector<float> values(static_cast<size_t>(m * k));
  visit_float_dtype("fp8_linear", args.x.dtype(), [&]<typename T>() {
    const T* source = args.x.data<T>();
    for (int64_t i = 0; i < m * k; ++i) values[i] = static_cast<float>(source[i]);
  });
  const int64_t group = args.activation == Fp8ActivationScale::group ? kFp8Block : k;
  const float fixed_scale =
      args.input_scale != nullptr ? args.input_scale->data<float>()[0] : 0.0f;
  parallel_for(m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      for (int64_t first = 0; first < k; first += group) {
        float* part = values.data() + row * k + first;
        const int64_t count = std::min(group, k - first);
        float scale = fixed_scale, inverse = 1.0f / fixed_scale;
        if (args.input_scale == nullptr) {
          float amax = 0.0f;
          for (int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(part[i]));
          scale = fp8_dynamic_scale(amax);
          inverse = fp8_dynamic_inverse(amax);
        }
        for (int64_t i = 0; i < count; ++i)
          part[i] = static_cast<float>(Float8E4M3(part[i] * inverse)) * scale;
      }
    }
  });
  return values;
}

void fp8_linear_kernel(const KernelArgs& kernel_args) {
  const Fp8LinearArgs args = check_fp8_linear(kernel_args);
  const int64_t m = args.m, n = args.n, k = args.k;
  if (args.out.numel() == 0) return;
  const std::vector<float> x = quantized_x(args);
  std::vector<float> staging;
  float* c = args.out.dtype() == DType::f32 ? args.out.data<float>() : nullptr;
  if (c == nullptr) {
    staging.resize(static_cast<size_t>(m * n));
    c = staging.data();
  }
  std::fill(c, c + m * n, 0.0f);
  const std::array<float, 256>& values = e4m3_values();
  const auto* codes = args.weight.data<uint8_t>();
  const float* scales = args.weight_scale.data<float>();
  const int64_t column_blocks = (k + kFp8Block - 1) / kFp8Block;
  const int64_t tile_rows = std::clamp<int64_t>(kTileBytes / (4 * k), 16, n);
  std::vector<float> tile(static_cast<size_t>(tile_rows * k));
  const MatrixOperand a{x.data(), DType::f32, k, 1};
  for (int64_t first = 0; first < n; first += tile_rows) {
    const int64_t rows = std::min(tile_rows, n - first);
    parallel_for(rows, 4, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t row = first + r;
        const uint8_t* code = codes + row * k;
        float* expanded = tile.data() + r * k;
        for (int64_t kk = 0; kk < k; ++kk) {
          const float scale = args.block_scaled
                                  ? scales[(row / kFp8Block) * column_blocks + kk / kFp8Block]
                                  : scales[row];
          expanded[kk] = values[code[kk]] * scale;
        }
      }
    });
    // b(kk, j) = tile[j, kk]: the tile's rows are b's columns.
    const MatrixOperand b{tile.data(), DType::f32, 1, k};
    gemm_accumulate(m, rows, k, a, b, c + first, n);
  }
  if (staging.empty()) return;
  visit_float_dtype("fp8_linear", args.out.dtype(), [&]<typename T>() {
    T* result = args.out.data<T>();
    for (int64_t i = 0; i < m * n; ++i) result[i] = T(staging[i]);
  });
}

TESSERA_REGISTER_KERNEL("fp8_linear", DeviceType::cpu, fp8_linear_kernel);

}  // namespace
}  // namespace tessera::cpu
