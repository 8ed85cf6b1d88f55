// CPU kernels of matmul and linear: shape checks and batching around gemm_accumulate (gemm.h).
// Outputs of f16/bf16 are accumulated in an f32 staging buffer, then rounded once.
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/quantized_linear.h"
#include "runtime/cpu/parallel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

MatrixOperand row_major(const Tensor& tensor, int64_t element_offset, int64_t cols) {
  return {static_cast<const char*>(tensor.data_ptr()) +
              element_offset * static_cast<int64_t>(element_size(tensor.dtype())),
          tensor.dtype(), cols, 1};
}

// out (m x n, row-major, of out's dtype, starting at element `out_offset`) = a @ b + bias.
void gemm_to_output(int64_t m, int64_t n, int64_t k, const MatrixOperand& a, const MatrixOperand& b,
                    const Tensor* bias, const Tensor& out, int64_t out_offset) {
  std::vector<float> staging;
  float* c = out.data<float>() + out_offset;
  if (out.dtype() != DType::f32) {
    staging.resize(static_cast<size_t>(m * n));
    c = staging.data();
  }
  const int64_t min_rows = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1));
  parallel_for(m, min_rows, [&](int64_t begin, int64_t end) {
    if (bias == nullptr) {
      std::fill(c + begin * n, c + end * n, 0.0f);
      return;
    }
    visit_float_dtype("linear", bias->dtype(), [&]<typename T>() {
      const T* bias_data = bias->data<T>();
      for (int64_t row = begin; row < end; ++row)
        for (int64_t j = 0; j < n; ++j) c[row * n + j] = static_cast<float>(bias_data[j]);
    });
  });
  gemm_accumulate(m, n, k, a, b, c, n);
  if (staging.empty()) return;
  visit_float_dtype("matmul", out.dtype(), [&]<typename T>() {
    T* result = out.data<T>() + out_offset;
    parallel_for(m * n, kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) result[i] = T(staging[i]);
    });
  });
}

void matmul_kernel(const KernelArgs& args) {
  const Tensor& a = args.inputs[0];
  const Tensor& b = args.inputs[1];
  const Tensor& out = args.outputs[0];
  const MatmulShape shape = check_matmul(a, b, out);
  const int64_t m = shape.m, n = shape.n, k = shape.k, batches = shape.batches;
  if (out.numel() == 0) return;
  if (!shape.batched) {  // one GEMM over all rows of a
    gemm_to_output(m, n, k, row_major(a, 0, k), row_major(b, 0, n), nullptr, out, 0);
    return;
  }
  auto run_batches = [&](int64_t begin, int64_t end) {
    for (int64_t batch = begin; batch < end; ++batch)
      gemm_to_output(m, n, k, row_major(a, batch * m * k, k), row_major(b, batch * k * n, n),
                     nullptr, out, batch * m * n);
  };
  // Many small products: one per thread at a time (each runs inline); few large ones: one after
  // another, each spread over the threads.
  constexpr int64_t kLargeProduct = int64_t{1} << 24;  // multiply-adds
  if (m * n * k < kLargeProduct || batches >= 4 * num_threads()) {
    parallel_for(batches, 1, run_batches);
  } else {
    run_batches(0, batches);
  }
}

void linear_kernel(const KernelArgs& args) {
  const LinearArgs linear = check_linear(args);
  const Tensor &x = linear.x, &weight = linear.weight, &out = linear.out;
  const Tensor* bias = linear.bias;
  const MatmulShape& shape = linear.shape;
  const int64_t n = shape.n, k = shape.k;
  if (out.numel() == 0) return;
  if (is_quantized(weight.dtype())) return quantized_linear(x, weight, bias, out);
  // weight [N, K] read as b = weight^T [K, N]: b(kk, j) = weight[j, kk].
  const MatrixOperand weight_transposed{weight.data_ptr(), weight.dtype(), 1, k};
  gemm_to_output(shape.m, n, k, row_major(x, 0, k), weight_transposed, bias, out, 0);
}

constexpr DeviceType kCpu = DeviceType::cpu;
TESSERA_REGISTER_KERNEL("matmul", kCpu, matmul_kernel);
TESSERA_REGISTER_KERNEL("linear", kCpu, linear_kernel);

}  // namespace
}  // namespace tessera::cpu
