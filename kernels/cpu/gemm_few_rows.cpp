// GEMM for few rows of a (decode batches), where packing b would cost as much as the product:
// every element of b is used only m times, so b is streamed once, straight from memory.
// - b's columns contiguous along k (linear's weight [N, K]): register tiles of dot products,
//   kDotRows rows of a by kDotCols columns of b, accumulated along k.
// - b's rows contiguous along n (matmul's b [K, N]), very few rows: c[i, :] += a[i, kk] * b[kk, :].
#include <algorithm>
#include <mutex>
#include <vector>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/cpu/cpu_features.h"
#include "runtime/cpu/parallel.h"

namespace tessera::cpu {
namespace {

constexpr int kDotRows = 2;
constexpr int kDotCols = 4;
// Up to this many rows the dot tiles beat packing (measured: linear 2048x2048, 1 and 2 threads).
constexpr int64_t kDotMaxRows = 64;
// Row updates only pay for themselves with very few rows.
constexpr int64_t kAxpyMaxRows = 3;

// Blocks of eight let the compiler vectorize without a runtime alias check (which -O2's cost
// model refuses); eight partial sums also keep the reduction from being strictly serial.
constexpr int kLanes = 8;

float dot(const float* x, const float* y, int64_t length) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= length; i += kLanes)
    for (int lane = 0; lane < kLanes; ++lane) lanes[lane] += x[i + lane] * y[i + lane];
  float total = 0.0f;
  for (; i < length; ++i) total += x[i] * y[i];
  for (float lane : lanes) total += lane;
  return total;
}

// y += scale * x
void axpy(float scale, const float* x, float* y, int64_t length) {
  int64_t i = 0;
  for (; i + kLanes <= length; i += kLanes) {
    float block[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) block[lane] = y[i + lane] + scale * x[i + lane];
    for (int lane = 0; lane < kLanes; ++lane) y[i + lane] = block[lane];
  }
  for (; i < length; ++i) y[i] += scale * x[i];
}

// out[r * kDotCols + j] = dot(row r of a, columns[j]) over k, for the full kDotRows x kDotCols.
using DotTile = void (*)(const float* a, int64_t lda, const float* const* columns, int64_t k,
                         float* out);

void dot_tile_portable(const float* a, int64_t lda, const float* const* columns, int64_t k,
                       float* out) {
  for (int r = 0; r < kDotRows; ++r)
    for (int j = 0; j < kDotCols; ++j) out[r * kDotCols + j] = dot(a + r * lda, columns[j], k);
}

#ifdef TESSERA_CPU_X86
__attribute__((target("avx2,fma"))) void dot_tile_avx2(const float* a, int64_t lda,
                                                       const float* const* columns, int64_t k,
                                                       float* out) {
  __m256 acc[kDotRows][kDotCols];
  for (int r = 0; r < kDotRows; ++r)
    for (int j = 0; j < kDotCols; ++j) acc[r][j] = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 8 <= k; d += 8) {
    const __m256 a0 = _mm256_loadu_ps(a + d);
    const __m256 a1 = _mm256_loadu_ps(a + lda + d);
#pragma GCC unroll 4
    for (int j = 0; j < kDotCols; ++j) {
      const __m256 column = _mm256_loadu_ps(columns[j] + d);
      acc[0][j] = _mm256_fmadd_ps(a0, column, acc[0][j]);
      acc[1][j] = _mm256_fmadd_ps(a1, column, acc[1][j]);
    }
  }
  for (int r = 0; r < kDotRows; ++r) {
    for (int j = 0; j < kDotCols; ++j) {
      __m128 sum =
          _mm_add_ps(_mm256_castps256_ps128(acc[r][j]), _mm256_extractf128_ps(acc[r][j], 1));
      sum = _mm_hadd_ps(sum, sum);
      sum = _mm_hadd_ps(sum, sum);
      float total = _mm_cvtss_f32(sum);
      for (int64_t tail = d; tail < k; ++tail) total += a[r * lda + tail] * columns[j][tail];
      out[r * kDotCols + j] = total;
    }
  }
}
#endif

// One row of a against 2 kDotCols columns: a decode step's single row, without the padded
// second row of the tile above (whose loads and FMAs are wasted there).
__attribute__((target("avx2,fma"))) void dot_row_avx2(const float* a, const float* const* columns,
                                                      int64_t k, float* out) {
  constexpr int kColumns = 2 * kDotCols;
  __m256 acc[kColumns];
  for (int j = 0; j < kColumns; ++j) acc[j] = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 8 <= k; d += 8) {
    const __m256 a0 = _mm256_loadu_ps(a + d);
#pragma GCC unroll 8
    for (int j = 0; j < kColumns; ++j)
      acc[j] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(columns[j] + d), acc[j]);
  }
  for (int j = 0; j < kColumns; ++j) {
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
    sum = _mm_hadd_ps(sum, sum);
    sum = _mm_hadd_ps(sum, sum);
    float total = _mm_cvtss_f32(sum);
    for (int64_t tail = d; tail < k; ++tail) total += a[tail] * columns[j][tail];
    out[j] = total;
  }
}

DotTile select_dot_tile() {
#ifdef TESSERA_CPU_X86
  if (cpu_has_avx2_fma()) return dot_tile_avx2;
#endif
  return dot_tile_portable;
}

// c[:m, :n] += a_rows (f32, rows_padded x k, zero rows past m) . b, b(kk, j) at
// b_data[j * col_stride + kk]. Column groups are spread over the threads.
template <typename T>
void dot_columns(int64_t m, int64_t n, int64_t k, const float* a_rows, const T* b_data,
                 int64_t col_stride, float* c, int64_t ldc) {
  static const DotTile dot_tile = select_dot_tile();
  const int64_t groups = (n + kDotCols - 1) / kDotCols;
  const int64_t min_groups =
      std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(k * kDotCols, 1));
#ifdef TESSERA_CPU_X86
  if constexpr (std::is_same_v<T, float>) {
    static const bool one_row_tile = cpu_has_avx2_fma();
    constexpr int kColumns = 2 * kDotCols;
    if (m == 1 && one_row_tile) {
      parallel_for((n + kColumns - 1) / kColumns, min_groups, [&](int64_t begin, int64_t end) {
        for (int64_t group = begin; group < end; ++group) {
          const int64_t first = group * kColumns;
          const int cols = static_cast<int>(std::min<int64_t>(kColumns, n - first));
          const float* columns[kColumns];
          for (int j = 0; j < kColumns; ++j)
            columns[j] = b_data + (first + (j < cols ? j : 0)) * col_stride;
          float out[kColumns];
          dot_row_avx2(a_rows, columns, k, out);
          for (int j = 0; j < cols; ++j) c[first + j] += out[j];
        }
      });
      return;
    }
  }
#endif
  parallel_for(groups, min_groups, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    for (int64_t group = begin; group < end; ++group) {
      const int64_t first = group * kDotCols;
      const int cols = static_cast<int>(std::min<int64_t>(kDotCols, n - first));
      const float* columns[kDotCols];
      if constexpr (!std::is_same_v<T, float>) scratch.resize(static_cast<size_t>(kDotCols * k));
      for (int j = 0; j < kDotCols; ++j) {
        if (j >= cols) {  // pad with a valid column; its results are dropped
          columns[j] = columns[0];
        } else if constexpr (std::is_same_v<T, float>) {
          columns[j] = b_data + (first + j) * col_stride;
        } else {
          load_floats(b_data + (first + j) * col_stride, k, scratch.data() + j * k);
          columns[j] = scratch.data() + j * k;
        }
      }
      for (int64_t row = 0; row < m; row += kDotRows) {
        float out[kDotRows * kDotCols];
        dot_tile(a_rows + row * k, k, columns, k, out);
        for (int r = 0; r < std::min<int64_t>(kDotRows, m - row); ++r)
          for (int j = 0; j < cols; ++j) c[(row + r) * ldc + first + j] += out[r * kDotCols + j];
      }
    }
  });
}

// c[:m, :] += a_rows . b, b(kk, j) at b_data[kk * row_stride + j]. The threads split k, so that
// each streams whole rows of b; each adds its partial product into c under a lock.
template <typename T>
void axpy_rows(int64_t m, int64_t n, int64_t k, const float* a_rows, const T* b_data,
               int64_t row_stride, float* c, int64_t ldc) {
  std::mutex c_mutex;
  parallel_for(k, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    const bool whole = begin == 0 && end == k;  // no other thread writes c
    std::vector<float> partial(whole ? 0 : static_cast<size_t>(m * n), 0.0f);
    float* target = whole ? c : partial.data();
    const int64_t target_stride = whole ? ldc : n;
    for (int64_t kk = begin; kk < end; ++kk) {
      const float* row = as_floats(b_data + kk * row_stride, n, scratch);
      for (int64_t i = 0; i < m; ++i) axpy(a_rows[i * k + kk], row, target + i * target_stride, n);
    }
    if (whole) return;
    std::lock_guard lock(c_mutex);
    for (int64_t i = 0; i < m; ++i) axpy(1.0f, partial.data() + i * n, c + i * ldc, n);
  });
}

}  // namespace

bool gemm_few_rows(int64_t m, int64_t n, int64_t k, const MatrixOperand& a, const MatrixOperand& b,
                   float* c, int64_t ldc) {
  const bool columns_contiguous = b.row_stride == 1 && m <= kDotMaxRows;
  const bool rows_contiguous = b.col_stride == 1 && m <= kAxpyMaxRows;
  if (a.col_stride != 1 || !(columns_contiguous || rows_contiguous)) return false;
  // a in f32, row-major, padded with zero rows to whole dot tiles.
  const int64_t rows_padded = (m + kDotRows - 1) / kDotRows * kDotRows;
  std::vector<float> a_rows(static_cast<size_t>(rows_padded * k), 0.0f);
  visit_float_dtype("matmul", a.dtype, [&]<typename T>() {
    for (int64_t i = 0; i < m; ++i)
      load_floats(static_cast<const T*>(a.data) + i * a.row_stride, k, a_rows.data() + i * k);
  });
  visit_float_dtype("matmul", b.dtype, [&]<typename T>() {
    const T* b_data = static_cast<const T*>(b.data);
    if (columns_contiguous) {
      dot_columns(m, n, k, a_rows.data(), b_data, b.col_stride, c, ldc);
    } else {
      axpy_rows(m, n, k, a_rows.data(), b_data, b.row_stride, c, ldc);
    }
  });
  return true;
}

}  // namespace tessera::cpu
