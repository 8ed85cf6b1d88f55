// The CPU matrix multiply behind the matmul and linear kernels: blocked and packed (GotoBLAS
// style) with an AVX2/FMA micro-kernel picked at run time, multi-threaded, accumulating in f32.
// Operands are read in any float dtype and any 2-D strides; f16/bf16 are converted to f32 once,
// while packing.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"

namespace tessera::cpu {

// A read-only matrix: element (row, col) is at data[row * row_stride + col * col_stride].
struct MatrixOperand {
  const void* data;
  DType dtype;  // f32, f16 or bf16
  int64_t row_stride;
  int64_t col_stride;
};

// c[m, n] += a[m, k] @ b[k, n], where c is f32 with rows `ldc` elements apart.
void gemm_accumulate(int64_t m, int64_t n, int64_t k, const MatrixOperand& a,
                     const MatrixOperand& b, float* c, int64_t ldc);

// The path for few rows of a (decode), used by gemm_accumulate: b is streamed once, unpacked.
// Returns false, doing nothing, when the shapes or layouts are not ones it handles.
bool gemm_few_rows(int64_t m, int64_t n, int64_t k, const MatrixOperand& a, const MatrixOperand& b,
                   float* c, int64_t ldc);

}  // namespace tessera::cpu
