// fp8_linear on the CPU: x quantized to e4m3, weight rows decoded a tile at a time, the f32 GEMM
// over the codes of each group of columns that shares one x scale and one weight scale, then the
// scales: kernels/quant/fp8_scaling.h's arithmetic. (The weight is decoded, not streamed: the CPU
// path is for correctness and small models; FP8's speed is the GPU's.)
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

// x's rows quantized to e4m3 by `args.activation`: the codes' values, and a scale per row and
// group of `group` columns.
struct QuantizedX {
  std::vector<float> codes;   // [m, k]
  std::vector<float> scales;  // [m, groups]
};

QuantizedX quantize_x(const Fp8LinearArgs& args, int64_t group) {
  const int64_t m = args.m, k = args.k, groups = (k + group - 1) / group;
  QuantizedX x{std::vector<float>(static_cast<size_t>(m * k)),
               std::vector<float>(static_cast<size_t>(m * groups))};
  visit_float_dtype("fp8_linear", args.x.dtype(), [&]<typename T>() {
    const T* source = args.x.data<T>();
    for (int64_t i = 0; i < m * k; ++i) x.codes[i] = static_cast<float>(source[i]);
  });
  const float fixed = args.input_scale != nullptr ? args.input_scale->data<float>()[0] : 0.0f;
  // Per token: the amax of the whole row, whatever `group` the weight's scales need.
  const int64_t amax_group = args.activation == Fp8ActivationScale::group ? kFp8Block : k;
  parallel_for(m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      for (int64_t first = 0; first < k; first += amax_group) {
        float* part = x.codes.data() + row * k + first;
        const int64_t count = std::min(amax_group, k - first);
        float scale = fixed, inverse = 1.0f / fixed;
        if (args.input_scale == nullptr) {
          float amax = 0.0f;
          for (int64_t i = 0; i < count; ++i) amax = std::max(amax, std::fabs(part[i]));
          scale = fp8_dynamic_scale(amax);
          inverse = fp8_dynamic_inverse(amax);
        }
        for (int64_t i = 0; i < count; ++i)
          part[i] = static_cast<float>(Float8E4M3(part[i] * inverse));
        for (int64_t g = first / group; g < (first + count + group - 1) / group; ++g)
          x.scales[row * groups + g] = scale;
      }
    }
  });
  return x;
}

void fp8_linear_kernel(const KernelArgs& kernel_args) {
  const Fp8LinearArgs args = check_fp8_linear(kernel_args);
  const int64_t m = args.m, n = args.n, k = args.k;
  if (args.out.numel() == 0) return;
  // Products of codes are exact in f32 and their sums nearly so: each group of columns that
  // shares both scales is summed on its own, then scaled, as the definition reads.
  const bool per_block = args.block_scaled || args.activation == Fp8ActivationScale::group;
  const int64_t group = per_block ? kFp8Block : std::max<int64_t>(k, 1);
  const int64_t groups = (k + group - 1) / group;
  const QuantizedX x = quantize_x(args, group);
  std::vector<float> staging;
  float* c = args.out.dtype() == DType::f32 ? args.out.data<float>() : nullptr;
  if (c == nullptr) {
    staging.resize(static_cast<size_t>(m * n));
    c = staging.data();
  }
  std::fill(c, c + m * n, 0.0f);
  const std::array<float, 256>& values = e4m3_values();
  const auto* codes = args.weight.data<uint8_t>();
  const float* weight_scales = args.weight_scale.data<float>();
  const int64_t column_blocks = (k + kFp8Block - 1) / kFp8Block;
  const int64_t tile_rows = std::min(std::max<int64_t>(kTileBytes / (4 * k), 16), n);
  std::vector<float> tile(static_cast<size_t>(tile_rows * k));
  std::vector<float> partial(static_cast<size_t>(m * tile_rows));
  for (int64_t first = 0; first < n; first += tile_rows) {
    const int64_t rows = std::min(tile_rows, n - first);
    parallel_for(rows * k, kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) tile[i] = values[codes[first * k + i]];
    });
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t start = g * group, count = std::min(group, k - start);
      std::fill(partial.begin(), partial.end(), 0.0f);
      // a = x's codes [m, count]; b(kk, j) = tile[j, start + kk].
      const MatrixOperand a{x.codes.data() + start, DType::f32, k, 1};
      const MatrixOperand b{tile.data() + start, DType::f32, 1, k};
      gemm_accumulate(m, rows, count, a, b, partial.data(), rows);
      for (int64_t row = 0; row < m; ++row) {
        const float x_scale = x.scales[row * groups + g];
        for (int64_t j = 0; j < rows; ++j) {
          const int64_t column = first + j;
          const float weight_scale = args.block_scaled
                                         ? weight_scales[(column / kFp8Block) * column_blocks + g]
                                         : weight_scales[column];
          c[row * n + column] += partial[row * rows + j] * (x_scale * weight_scale);
        }
      }
    }
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
