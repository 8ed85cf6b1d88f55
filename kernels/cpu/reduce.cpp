// CPU kernels of the last-dim reductions (sum, mean, max, argmax) and softmax. Inputs are
// contiguous, so each row is a contiguous run of the last dim; rows are spread over threads and
// every row accumulates in f32.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/kernel_util.h"
#include "runtime/cpu/parallel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

struct Rows {
  int64_t count;   // product of the leading dims
  int64_t length;  // the last dim
};

Rows rows_of(const char* op, const Tensor& x) {
  require_contiguous(op, "the input", x);
  if (x.dim() == 0) return {1, 1};
  const Shape& sizes = x.sizes();
  return {shape_numel(std::span(sizes).first(sizes.size() - 1)), sizes.back()};
}

// Calls row_fn(row) for every row, in parallel when the rows hold enough elements.
template <typename RowFn>
void for_each_row_of(const Rows& rows, const RowFn& row_fn) {
  const int64_t min_rows = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(rows.length, 1));
  parallel_for(rows.count, min_rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) row_fn(row);
  });
}

// Eight independent partial sums: the compiler vectorizes them (one running sum would force
// strictly serial float additions), and they lose less precision over long rows.
template <typename T>
float row_sum(const T* row, int64_t length) {
  constexpr int kLanes = 8;
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= length; i += kLanes)
    for (int lane = 0; lane < kLanes; ++lane) lanes[lane] += static_cast<float>(row[i + lane]);
  float total = 0.0f;
  for (; i < length; ++i) total += static_cast<float>(row[i]);
  for (float lane : lanes) total += lane;
  return total;
}

// NaN wins, as torch.max does.
template <typename T>
float row_max(const T* row, int64_t length) {
  float best = static_cast<float>(row[0]);
  for (int64_t i = 1; i < length; ++i) {
    const float value = static_cast<float>(row[i]);
    if (value > best || value != value) best = value;
  }
  return best;
}

// First index of the maximum; a NaN counts as the maximum, as torch.argmax does.
template <typename T>
int64_t row_argmax(const T* row, int64_t length) {
  float best = static_cast<float>(row[0]);
  if (best != best) return 0;
  int64_t best_index = 0;
  for (int64_t i = 1; i < length; ++i) {
    const float value = static_cast<float>(row[i]);
    if (value != value) return i;
    if (value > best) {
      best = value;
      best_index = i;
    }
  }
  return best_index;
}

enum class Reduction { sum, mean, max, argmax };

template <Reduction kind>
void reduce_kernel(const KernelArgs& args) {
  constexpr const char* kNames[] = {"sum", "mean", "max", "argmax"};
  const char* op = kNames[static_cast<int>(kind)];
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const Rows rows = rows_of(op, x);
  require_dtype(op, "output", out, kind == Reduction::argmax ? DType::i64 : x.dtype());
  TESSERA_REQUIRE(out.numel() == rows.count, "{}: output {} does not hold one value per row of {}",
                  op, out.str(), x.str());
  if constexpr (kind == Reduction::max || kind == Reduction::argmax) {
    TESSERA_REQUIRE(rows.length > 0 || rows.count == 0,
                    "{}: cannot reduce an empty last dim (input {}); it has no maximum", op,
                    x.str());
  }
  visit_float_dtype(op, x.dtype(), [&]<typename T>() {
    const T* in = x.data<T>();
    for_each_row_of(rows, [&](int64_t row) {
      const T* values = in + row * rows.length;
      if constexpr (kind == Reduction::argmax) {
        out.data<int64_t>()[row] = row_argmax(values, rows.length);
      } else if constexpr (kind == Reduction::max) {
        out.data<T>()[row] = T(row_max(values, rows.length));
      } else {
        float total = row_sum(values, rows.length);
        if constexpr (kind == Reduction::mean) total /= static_cast<float>(rows.length);
        out.data<T>()[row] = T(total);
      }
    });
  });
}

// Numerically stable: exponentiates x - max(x), so the largest term is exp(0) = 1.
void softmax_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const Rows rows = rows_of("softmax", x);
  require_dtype("softmax", "output", out, x.dtype());
  require_sizes("softmax", "output", out, x.sizes());
  if (rows.length == 0) return;
  visit_float_dtype("softmax", x.dtype(), [&]<typename T>() {
    for_each_row_of(rows, [&](int64_t row) {
      thread_local std::vector<float> exps;
      exps.resize(static_cast<size_t>(rows.length));
      const T* in = x.data<T>() + row * rows.length;
      T* result = out.data<T>() + row * rows.length;
      const float max_value = row_max(in, rows.length);
      for (int64_t i = 0; i < rows.length; ++i)
        exps[i] = std::exp(static_cast<float>(in[i]) - max_value);
      const float scale = 1.0f / row_sum(exps.data(), rows.length);
      for (int64_t i = 0; i < rows.length; ++i) result[i] = T(exps[i] * scale);
    });
  });
}

constexpr DeviceType kCpu = DeviceType::cpu;
TESSERA_REGISTER_KERNEL("sum", kCpu, reduce_kernel<Reduction::sum>);
TESSERA_REGISTER_KERNEL("mean", kCpu, reduce_kernel<Reduction::mean>);
TESSERA_REGISTER_KERNEL("max", kCpu, reduce_kernel<Reduction::max>);
TESSERA_REGISTER_KERNEL("argmax", kCpu, reduce_kernel<Reduction::argmax>);
TESSERA_REGISTER_KERNEL("softmax", kCpu, softmax_kernel);

}  // namespace
}  // namespace tessera::cpu
