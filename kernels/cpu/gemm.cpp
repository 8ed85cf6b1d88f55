#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/cpu/cpu_features.h"
#include "runtime/cpu/parallel.h"

namespace tessera::cpu {
namespace {

// Register tile of the micro-kernel (6 x 16 floats = 12 AVX2 accumulators) and cache blocks:
// an A block (kMc x kKc) stays in L2, a B panel (kKc x kNr) in L1, a B block (kKc x kNc) in L2/L3.
constexpr int kMr = 6;
constexpr int kNr = 16;
constexpr int64_t kKc = 256;
constexpr int64_t kMc = 96;
constexpr int64_t kNc = 1024;

// Adds the valid rows x cols corner of a full kMr x kNr tile into c.
void add_tile(const float* tile, float* c, int64_t ldc, int rows, int cols) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < cols; ++j) c[r * ldc + j] += tile[r * kNr + j];
}

// c[rows, cols] += a_panel (depth x kMr) . b_panel (depth x kNr); panels are zero-padded.
using MicroKernel = void (*)(int64_t depth, const float* a, const float* b, float* c, int64_t ldc,
                             int rows, int cols);

void micro_kernel_portable(int64_t depth, const float* a, const float* b, float* c, int64_t ldc,
                           int rows, int cols) {
  float tile[kMr * kNr] = {};
  for (int64_t d = 0; d < depth; ++d, a += kMr, b += kNr)
    for (int r = 0; r < kMr; ++r)
      for (int j = 0; j < kNr; ++j) tile[r * kNr + j] += a[r] * b[j];
  add_tile(tile, c, ldc, rows, cols);
}

#ifdef TESSERA_CPU_X86
__attribute__((target("avx2,fma"))) void micro_kernel_avx2(int64_t depth, const float* a,
                                                           const float* b, float* c, int64_t ldc,
                                                           int rows, int cols) {
  __m256 acc[kMr][2];
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t d = 0; d < depth; ++d, a += kMr, b += kNr) {
    const __m256 b_low = _mm256_loadu_ps(b);
    const __m256 b_high = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m256 a_value = _mm256_broadcast_ss(a + r);
      acc[r][0] = _mm256_fmadd_ps(a_value, b_low, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a_value, b_high, acc[r][1]);
    }
  }
  if (rows == kMr && cols == kNr) {
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      float* row = c + r * ldc;
      _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), acc[r][0]));
      _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[r][1]));
    }
    return;
  }
  float tile[kMr * kNr];
  for (int r = 0; r < kMr; ++r) {
    _mm256_storeu_ps(tile + r * kNr, acc[r][0]);
    _mm256_storeu_ps(tile + r * kNr + 8, acc[r][1]);
  }
  add_tile(tile, c, ldc, rows, cols);
}
#endif

MicroKernel select_micro_kernel() {
#ifdef TESSERA_CPU_X86
  if (cpu_has_avx2_fma()) return micro_kernel_avx2;
#endif
  return micro_kernel_portable;
}

// Packs `lines` (<= kWidth) lines of `depth` (<= kKc) elements into dst[d * kWidth + line] as
// f32, zero padding the missing lines. Element (line, d) is base[line * line_stride + d *
// depth_stride]; rows of a and columns of b are both "lines", so one packer serves both operands.
template <int kWidth, typename T>
void pack_panel(const T* base, int64_t line_stride, int64_t depth_stride, int64_t lines,
                int64_t depth, float* dst) {
  if (line_stride == 1) {  // each depth step is a contiguous run of lines (matmul's b)
    for (int64_t d = 0; d < depth; ++d)
      load_floats(base + d * depth_stride, lines, dst + d * kWidth);
  } else if (depth_stride == 1) {  // each line is contiguous (a, linear's weight)
    float line_values[kKc];
    for (int64_t line = 0; line < lines; ++line) {
      load_floats(base + line * line_stride, depth, line_values);
      for (int64_t d = 0; d < depth; ++d) dst[d * kWidth + line] = line_values[d];
    }
  } else {
    for (int64_t d = 0; d < depth; ++d)
      for (int64_t line = 0; line < lines; ++line)
        dst[d * kWidth + line] = static_cast<float>(base[line * line_stride + d * depth_stride]);
  }
  for (int64_t d = 0; d < depth; ++d)
    for (int64_t line = lines; line < kWidth; ++line) dst[d * kWidth + line] = 0.0f;
}

// Packs lines [first, first + count) of a matrix, depth [depth_begin, depth_begin + depth), into
// consecutive kWidth-line panels.
template <int kWidth>
void pack_lines(const MatrixOperand& matrix, bool lines_are_rows, int64_t first, int64_t count,
                int64_t depth_begin, int64_t depth, float* dst) {
  const int64_t line_stride = lines_are_rows ? matrix.row_stride : matrix.col_stride;
  const int64_t depth_stride = lines_are_rows ? matrix.col_stride : matrix.row_stride;
  visit_float_dtype("matmul", matrix.dtype, [&]<typename T>() {
    const T* base = static_cast<const T*>(matrix.data) + depth_begin * depth_stride;
    for (int64_t line = 0; line < count; line += kWidth) {
      pack_panel<kWidth>(base + (first + line) * line_stride, line_stride, depth_stride,
                         std::min<int64_t>(kWidth, count - line), depth, dst + line * depth);
    }
  });
}

// One thread's share of the output, c[row_begin:row_end, col_begin:col_end], computed with the
// classic GotoBLAS loops: B block (kKc x kNc) packed once, reused by every A block (kMc x kKc).
void gemm_tile(int64_t row_begin, int64_t row_end, int64_t col_begin, int64_t col_end, int64_t k,
               const MatrixOperand& a, const MatrixOperand& b, float* c, int64_t ldc) {
  static const MicroKernel micro_kernel = select_micro_kernel();
  thread_local std::vector<float> packed_a(kMc * kKc);
  thread_local std::vector<float> packed_b(kKc * kNc);
  for (int64_t block_col = col_begin; block_col < col_end; block_col += kNc) {
    const int64_t cols = std::min(kNc, col_end - block_col);
    for (int64_t depth_begin = 0; depth_begin < k; depth_begin += kKc) {
      const int64_t depth = std::min(kKc, k - depth_begin);
      pack_lines<kNr>(b, false, block_col, cols, depth_begin, depth, packed_b.data());
      for (int64_t block_row = row_begin; block_row < row_end; block_row += kMc) {
        const int64_t rows = std::min(kMc, row_end - block_row);
        pack_lines<kMr>(a, true, block_row, rows, depth_begin, depth, packed_a.data());
        for (int64_t col = 0; col < cols; col += kNr) {
          const int panel_cols = static_cast<int>(std::min<int64_t>(kNr, cols - col));
          for (int64_t row = 0; row < rows; row += kMr) {
            micro_kernel(depth, packed_a.data() + row * depth, packed_b.data() + col * depth,
                         c + (block_row + row) * ldc + block_col + col, ldc,
                         static_cast<int>(std::min<int64_t>(kMr, rows - row)), panel_cols);
          }
        }
      }
    }
  }
}

// How to cut the output among threads: row_parts x col_parts independent tiles, so that one
// parallel region with no barriers does all the work. Each part packs its own operands, so a
// cut through the rows re-packs b and a cut through the columns re-packs a: pick the cheaper.
struct Split {
  int64_t row_parts = 1;
  int64_t col_parts = 1;
};

Split choose_split(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kMinTaskWork = int64_t{1} << 20;  // multiply-adds worth a thread
  if (in_parallel_region() || num_threads() == 1) return {};
  const int64_t row_tiles = (m + kMr - 1) / kMr;
  const int64_t col_tiles = (n + kNr - 1) / kNr;
  // A few parts per thread: the cores are shared, and a thread that gets ahead takes another.
  const int64_t most =
      std::min<int64_t>(4 * num_threads(), std::max<int64_t>(1, m * n * k / kMinTaskWork));
  for (int64_t tasks = most; tasks > 1; --tasks) {
    Split best;
    int64_t best_cost = -1;
    for (int64_t row_parts = 1; row_parts <= tasks; ++row_parts) {
      const int64_t col_parts = tasks / row_parts;
      if (row_parts * col_parts != tasks || row_parts > row_tiles || col_parts > col_tiles)
        continue;
      const int64_t packing = row_parts * k * n + col_parts * m * k;
      if (best_cost < 0 || packing < best_cost) {
        best = {row_parts, col_parts};
        best_cost = packing;
      }
    }
    if (best_cost >= 0) return best;
  }
  return {};
}

// [begin, end) of part `part` of `parts` over `total` items grouped in tiles of `tile`.
std::pair<int64_t, int64_t> part_range(int64_t part, int64_t parts, int64_t total, int64_t tile) {
  const int64_t tiles = (total + tile - 1) / tile;
  return {std::min(total, part * tiles / parts * tile),
          std::min(total, (part + 1) * tiles / parts * tile)};
}

void gemm_blocked(int64_t m, int64_t n, int64_t k, const MatrixOperand& a, const MatrixOperand& b,
                  float* c, int64_t ldc) {
  const Split split = choose_split(m, n, k);
  parallel_for(split.row_parts * split.col_parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const auto [row_begin, row_end] = part_range(task / split.col_parts, split.row_parts, m, kMr);
      const auto [col_begin, col_end] = part_range(task % split.col_parts, split.col_parts, n, kNr);
      gemm_tile(row_begin, row_end, col_begin, col_end, k, a, b, c, ldc);
    }
  });
}

}  // namespace

void gemm_accumulate(int64_t m, int64_t n, int64_t k, const MatrixOperand& a,
                     const MatrixOperand& b, float* c, int64_t ldc) {
  if (m == 0 || n == 0 || k == 0) return;
  if (gemm_few_rows(m, n, k, a, b, c, ldc)) return;
  gemm_blocked(m, n, k, a, b, c, ldc);
}

}  // namespace tessera::cpu
