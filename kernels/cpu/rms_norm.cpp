// CPU kernels of the custom ops rms_norm and fused_add_rms_norm (compile/ops/custom/rms_norm.cpp).
// Each row of the last dim is normalized by its root mean square, in f32, and multiplied by the
// weight; the output is rounded once. fused_add_rms_norm first adds the residual in f32, writes
// that sum rounded to the dtype as residual_out, and normalizes the f32 sum (not the rounded one).
// Rows are spread over threads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/kernel_util.h"
#include "runtime/cpu/parallel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

// Eight independent partial sums: they vectorize, and lose less precision over long rows than
// one running sum.
float sum_of_squares(const float* row, int64_t length) {
  constexpr int kLanes = 8;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= length; i += kLanes)
    for (int lane = 0; lane < kLanes; ++lane) lanes[lane] += row[i + lane] * row[i + lane];
  float total = 0.0f;
  for (; i < length; ++i) total += row[i] * row[i];
  for (float lane : lanes) total += lane;
  return total;
}

// 1 / sqrt(mean(x^2) + eps), as the decomposition computes it (mean, add eps, rsqrt in f32).
float inverse_rms(const float* row, int64_t length, float eps) {
  const float mean_square = sum_of_squares(row, length) / static_cast<float>(length);
  return 1.0f / std::sqrt(mean_square + eps);
}

template <typename T>
void write_normalized(const float* row, const T* weight, int64_t length, float eps, T* out) {
  const float scale = inverse_rms(row, length, eps);
  for (int64_t i = 0; i < length; ++i) out[i] = T(row[i] * scale * static_cast<float>(weight[i]));
}

struct NormShape {
  int64_t rows;
  int64_t hidden;  // the last dim
};

// Checks what the kernels rely on (the meta function has checked the rest) and returns the rows.
NormShape check_norm(const char* op, const Tensor& x, const Tensor& weight,
                     std::span<Tensor> outputs) {
  require_contiguous(op, "x", x);
  require_contiguous(op, "weight", weight);
  TESSERA_REQUIRE(x.dim() >= 1, "{}: x {} needs at least one dim", op, x.str());
  const int64_t hidden = x.sizes().back();
  require_dtype(op, "weight", weight, x.dtype());
  require_sizes(op, "weight", weight, {hidden});
  for (const Tensor& out : outputs) {
    require_dtype(op, "output", out, x.dtype());
    require_sizes(op, "output", out, x.sizes());
    require_contiguous(op, "output", out);
  }
  return {hidden == 0 ? 0 : x.numel() / hidden, hidden};
}

// Calls row_fn(row, f32 buffer of one row) for every row, in parallel when there is enough work.
template <typename RowFn>
void for_each_row(const NormShape& shape, const RowFn& row_fn) {
  const int64_t min_rows =
      std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(shape.hidden, 1));
  parallel_for(shape.rows, min_rows, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> row_f32;
    row_f32.resize(static_cast<size_t>(shape.hidden));
    for (int64_t row = begin; row < end; ++row) row_fn(row, row_f32.data());
  });
}

void rms_norm_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& weight = args.inputs[1];
  const NormShape shape = check_norm("rms_norm", x, weight, args.outputs);
  const float eps = static_cast<float>(args.attributes.get_float("eps"));
  visit_float_dtype("rms_norm", x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    const T* weights = weight.data<T>();
    T* out = args.outputs[0].data<T>();
    for_each_row(shape, [&](int64_t row, float* row_f32) {
      const T* values = in + row * shape.hidden;
      for (int64_t i = 0; i < shape.hidden; ++i) row_f32[i] = static_cast<float>(values[i]);
      write_normalized(row_f32, weights, shape.hidden, eps, out + row * shape.hidden);
    });
  });
}

// Outputs: {out, residual_out}. The f32 sum is kept in a row buffer, so the kernel stays correct
// even if residual_out shares memory with x or residual.
void fused_add_rms_norm_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& residual = args.inputs[1];
  const Tensor& weight = args.inputs[2];
  const char* op = "fused_add_rms_norm";
  const NormShape shape = check_norm(op, x, weight, args.outputs);
  require_contiguous(op, "residual", residual);
  require_dtype(op, "residual", residual, x.dtype());
  require_sizes(op, "residual", residual, x.sizes());
  const float eps = static_cast<float>(args.attributes.get_float("eps"));
  visit_float_dtype(op, x.dtype(), [&]<typename T>() {
    const T* weights = weight.data<T>();
    T* out = args.outputs[0].data<T>();
    T* residual_out = args.outputs[1].data<T>();
    for_each_row(shape, [&](int64_t row, float* row_f32) {
      const int64_t start = row * shape.hidden;
      const T* x_row = x.data<T>() + start;
      const T* residual_row = residual.data<T>() + start;
      for (int64_t i = 0; i < shape.hidden; ++i)
        row_f32[i] = static_cast<float>(x_row[i]) + static_cast<float>(residual_row[i]);
      for (int64_t i = 0; i < shape.hidden; ++i) residual_out[start + i] = T(row_f32[i]);
      write_normalized(row_f32, weights, shape.hidden, eps, out + start);
    });
  });
}

TESSERA_REGISTER_KERNEL("rms_norm", DeviceType::cpu, rms_norm_kernel);
TESSERA_REGISTER_KERNEL("fused_add_rms_norm", DeviceType::cpu, fused_add_rms_norm_kernel);

}  // namespace
}  // namespace tessera::cpu
