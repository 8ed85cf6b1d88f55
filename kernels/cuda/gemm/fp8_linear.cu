// fp8_linear on CUDA (sm_89 and newer: FP8 tensor cores). x is quantized to e4m3 by a kernel of
// its own (codes and scales as kernels/quant/fp8_scaling.h defines them: the same float
// operations as the CPU, so both devices quantize x to the same codes), then
//   - up to kFp8GemvMaxRows rows (decode): a weight-streaming kernel on FP8 tensor cores (x's rows
//     as the mma's columns), the scales applied per 128 columns or at the end;
//   - more rows: a cuBLASLt FP8 matmul with the scales as its operands' scale vectors (per
//     channel and per token: OUTER_VEC; per block: BLK128x128 with x's VEC128; fixed: a scalar).
// CUDA only: the HIP module leaves this file out (ROCm as Debian ships it has no hipBLASLt), so
// fp8_linear on an AMD device has no kernel, and the error names the op and the device.
#include <cuda_fp8.h>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm/kept_scratch.h"
#include "kernels/cuda/gemm/lt_plan.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/kernel_checks.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/profiler/profiler.h"

namespace tessera::gpu {
namespace {

// Rows of x up to which the weight-streaming kernel runs (decode); more go to cuBLASLt.
// (2 tiles of the mma's 8 columns; 4 tiles take 128 registers and ran at 40% of the copy
// bandwidth at 32 rows, slower than cuBLASLt: docs/performance.md)
constexpr int64_t kFp8GemvMaxRows = 16;
// cuBLASLt's FP8 matmuls take rows of x in multiples of this.
constexpr int64_t kPaddedRows = 4;
// The FP8 kernels read 16 columns (bytes of codes) at a time: sizes must be multiples of it.
constexpr int kLaneColumns = 16;

// Round to nearest even, saturating at +-448 (runtime/float8.h's rule).
__device__ inline uint8_t e4m3_code(float value) {
  return __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3);
}

__device__ inline float warp_max(float value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
// Where x's scale of row `row`, column group `group` goes: row-major [m, groups], or, for
// cuBLASLt's VEC128 (its column-major [groups, m] with the rows adjacent), group-major.
struct ScaleLayout {
  bool group_major = false;
  int64_t rows = 0, groups = 0;
  __device__ int64_t index(int64_t row, int64_t group) const {
    return group_major ? group * rows + row : row * groups + group;
  }
};

// One block (kQuantizeThreads) per row of x, four values per thread at a time (k is a multiple
// of 16): per 128-column group (amax_group 128) a warp per group, no block barrier; per row
// (token) the block reduces the amax, then quantizes from the cache. The scale is written for
// each of the `scale_group` groups a segment covers (per token with block-scaled weights: the
// row's one scale for every 128 columns). fixed_scale: the checkpoint's input scale instead of an
// amax. Rows from
// `rows` up to the grid's (cuBLASLt's padding) get zero codes and scale 1.
constexpr int kQuantizeThreads = 1024;
template <typename T>
__device__ inline float4 load4(const T* source) {
  const Pack<T, 4> pack = load_pack<4>(source);
  return float4{to_float(pack.values[0]), to_float(pack.values[1]), to_float(pack.values[2]),
                to_float(pack.values[3])};
}
__device__ inline float max4(float4 v) {
  return fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
}
__device__ inline void store4(float4 v, float inverse, uint8_t* codes) {
  const uint32_t c0 = e4m3_code(v.x * inverse), c1 = e4m3_code(v.y * inverse);
  const uint32_t c2 = e4m3_code(v.z * inverse), c3 = e4m3_code(v.w * inverse);
  *reinterpret_cast<uint32_t*>(codes) = c0 | (c1 << 8) | (c2 << 16) | (c3 << 24);
}

template <typename T>
__global__ void quantize_x_kernel(const T* x, int64_t rows, int64_t k, int64_t amax_group,
                                  int64_t scale_group, const float* fixed_scale, uint8_t* codes,
                                  float* scales, ScaleLayout layout) {
  wait_for_prior_grids();
  const int64_t row = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const T* row_x = x + row * k;
  if (row >= rows) {
    for (int64_t i = threadIdx.x; i < k; i += blockDim.x) codes[row * k + i] = 0;
    for (int64_t group = threadIdx.x; group < layout.groups; group += blockDim.x)
      scales[layout.index(row, group)] = 1.0f;
    return;
  }
  if (amax_group == kFp8Block && fixed_scale == nullptr) {
    for (int64_t group = warp; group * kFp8Block < k; group += warps) {
      const int64_t at = group * kFp8Block + 4 * lane;
      const float4 v = at < k ? load4(row_x + at) : float4{};
      const float amax = warp_max(max4(v));
      if (at < k) store4(v, fp8_dynamic_inverse(amax), codes + row * k + at);
      if (lane == 0) scales[layout.index(row, group)] = fp8_dynamic_scale(amax);
    }
    return;
  }
  float scale, inverse;
  if (fixed_scale != nullptr) {
    scale = *fixed_scale;
    inverse = 1.0f / scale;
  } else {
    __shared__ float warp_amax[32];
    float amax = 0.0f;
    for (int64_t at = 4 * threadIdx.x; at < k; at += 4 * blockDim.x)
      amax = fmaxf(amax, max4(load4(row_x + at)));
    amax = warp_max(amax);
    if (lane == 0) warp_amax[warp] = amax;
    __syncthreads();
    amax = warp_max(lane < warps ? warp_amax[lane] : 0.0f);
    scale = fp8_dynamic_scale(amax);
    inverse = fp8_dynamic_inverse(amax);
  }
  for (int64_t at = 4 * threadIdx.x; at < k; at += 4 * blockDim.x)
    store4(load4(row_x + at), inverse, codes + row * k + at);
  for (int64_t group = threadIdx.x; group < layout.groups; group += blockDim.x)
    scales[layout.index(row, group)] = scale;
}

// cuBLASLt reads 128x128 block scales with each row of blocks padded to a multiple of 4 floats
// (measured: an unpadded [Nb, Kb] with Kb % 4 != 0 gives wrong outputs).
constexpr int64_t kBlockScaleRowAlignment = 4;
__global__ void pad_block_scales_kernel(const float* scales, int64_t row_blocks,
                                        int64_t column_blocks, int64_t padded_columns,
                                        float* padded) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= row_blocks * padded_columns) return;
  const int64_t row = i / padded_columns, column = i % padded_columns;
  padded[i] = column < column_blocks ? scales[row * column_blocks + column] : 0.0f;
}

// acc (16x8 f32) += a (16x32 e4m3) @ b (32x8 e4m3): the register layout of mma.cuh's s8
// m16n8k32 (A {row g, k 4q..}, {row g+8, k 4q..}, {row g, k 16+4q..}, {row g+8, k 16+4q..}; B
// {k 4q.., col g}, {k 16+4q.., col g}); sm_89 and newer.
__device__ __forceinline__ void mma_e4m3_16x8x32(float (&acc)[4], uint32_t a0, uint32_t a1,
                                                 uint32_t a2, uint32_t a3, uint32_t b0,
                                                 uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // built for an older GPU: fp8_linear_entry refuses such a device before launching
#endif
}

// out[m, n] for m <= 8 * Tiles (decode): FP8 tensor cores with x's rows as the mma's columns,
// 8 per tile. A block takes 16 weight rows; its warps split k in steps of 128 (one scale block),
// each step two halves of 64 columns. A lane (g = lane / 4, q = lane % 4) loads 16 bytes of rows
// g and g + 8 and of x's rows g, g + 8, ... (one per tile) at columns 16q..16q+15 of the half:
// the mma sums over k in any order as long as A and B agree, so the lane's 16 bytes feed two
// mmas (words 0-1, then 2-3) in place of the k slots 4q.. and 16+4q... Each step's sum is scaled
// by its block's scales as it is added; per channel and per token the scales come once at the
// end. The warps' sums meet in shared memory.
constexpr int kMmaWarps = 8;
constexpr int kMmaRows = 16;
constexpr int kMmaTileTokens = 8;
template <typename T, int Tiles>
__global__ void __launch_bounds__(kMmaWarps * 32)
    fp8_mma_gemv_kernel(int64_t m, int64_t n, int64_t k, const uint8_t* weight,
                        const float* weight_scales, bool block_scaled, const uint8_t* x_codes,
                        const float* x_scales, int64_t x_groups, T* out) {
  constexpr int kTokens = kMmaTileTokens * Tiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kMmaRows;
  const int64_t steps = (k + kFp8Block - 1) / kFp8Block;
  const bool grouped = block_scaled || x_groups > 1;
  const uint8_t* row_low = weight + (row0 + g) * k;
  const uint8_t* row_high = weight + (row0 + g + 8) * k;
  float total[Tiles][4] = {};
  // The weight is this kernel's own input: the first step's loads go out before x's
  // quantization ends.
  bool waited = false;
  for (int64_t step = warp; step < steps; step += kMmaWarps) {
    uint4 low[2], high[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t column = step * kFp8Block + half * 64 + q * 16;
      const bool inside = column < k;
      low[half] = inside ? __ldg(reinterpret_cast<const uint4*>(row_low + column)) : uint4{};
      high[half] = inside ? __ldg(reinterpret_cast<const uint4*>(row_high + column)) : uint4{};
    }
    if (!waited) {
      wait_for_prior_grids();
      waited = true;
    }
    const float weight_scale =
        block_scaled ? weight_scales[(row0 / kFp8Block) * steps + step] : 1.0f;
    const int64_t group = x_groups > 1 ? step : 0;
#pragma unroll
    for (int tile = 0; tile < Tiles; ++tile) {
      const int64_t x_row = tile * kMmaTileTokens + g;
      uint4 xs[2];  // both halves' x before the mmas: one wait on memory per step, not two
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t column = step * kFp8Block + half * 64 + q * 16;
        xs[half] = x_row < m && column < k
                       ? *reinterpret_cast<const uint4*>(x_codes + x_row * k + column)
                       : uint4{};
      }
      float acc[4] = {};
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        mma_e4m3_16x8x32(acc, low[half].x, high[half].x, low[half].y, high[half].y, xs[half].x,
                         xs[half].y);
        mma_e4m3_16x8x32(acc, low[half].z, high[half].z, low[half].w, high[half].w, xs[half].z,
                         xs[half].w);
      }
      // c0, c1: row g, tokens 2q and 2q + 1 of the tile; c2, c3: row g + 8, the same tokens.
      // Rows 16-aligned share their 128-row block.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (!grouped) {
          total[tile][i] += acc[i];
          continue;
        }
        const int64_t token = tile * kMmaTileTokens + 2 * q + (i & 1);
        const float x_scale = token < m ? x_scales[token * x_groups + group] : 0.0f;
        total[tile][i] += acc[i] * (x_scale * weight_scale);
      }
    }
  }
  if (!waited) wait_for_prior_grids();
  __shared__ float sums[kMmaWarps][kMmaRows][kTokens];
#pragma unroll
  for (int tile = 0; tile < Tiles; ++tile)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      sums[warp][g + (i >= 2 ? 8 : 0)][tile * kMmaTileTokens + 2 * q + (i & 1)] = total[tile][i];
  __syncthreads();
  for (int index = threadIdx.x; index < kMmaRows * kTokens; index += blockDim.x) {
    const int row = index / kTokens, token = index % kTokens;
    if (token >= m) continue;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kMmaWarps; ++w) sum += sums[w][row][token];
    if (!grouped) sum *= x_scales[token];
    if (!block_scaled) sum *= weight_scales[row0 + row];
    out[token * n + row0 + row] = from_compute<T>(sum);
  }
}

// x's codes and scales, kept per device and stream for the process (kept_scratch: a captured
// graph replays into them). Also, for cuBLASLt, room for the output of padded rows and for
// padded block scales.
struct QuantizedX {
  uint8_t* codes;
  float* scales;
  void* padded_out;
  float* padded_weight_scales;
};
int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
QuantizedX x_scratch(Device device, gpuStream_t stream, int64_t m, int64_t k, int64_t groups,
                     int64_t out_bytes, int64_t weight_scale_count) {
  const int64_t code_bytes = round_up(m * k, 256);
  const int64_t scale_bytes = round_up(4 * m * groups, 256);
  const int64_t padded_out_bytes = round_up(out_bytes, 256);
  const int64_t bytes = code_bytes + scale_bytes + padded_out_bytes + 4 * weight_scale_count;
  auto* base = static_cast<uint8_t*>(kept_scratch(device, stream, bytes, "fp8 x"));
  return QuantizedX{base, reinterpret_cast<float*>(base + code_bytes),
                    base + code_bytes + scale_bytes,
                    reinterpret_cast<float*>(base + code_bytes + scale_bytes + padded_out_bytes)};
}

// A cuBLASLt FP8 plan per problem and device: descriptor, layouts and the heuristic's algorithm.
struct Fp8Plan {
  LtMatmulDesc matmul;
  LtLayout weight, x, out;
  cublasLtMatmulAlgo_t algorithm{};
};
using Fp8PlanKey = std::tuple<int, int64_t, int64_t, int64_t, int, bool, int>;

cudaDataType out_type(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

template <typename Attribute>
void set_attribute(const LtMatmulDesc& matmul, cublasLtMatmulDescAttributes_t name,
                   const Attribute& value) {
  GPUBLAS_CHECK(cublasLtMatmulDescSetAttribute(matmul.get(), name, &value, sizeof(value)));
}

// out (col-major [n, m]) = weight^T (col-major [k, n], transposed) x (col-major [k, m]), with m
// padded to `padded_rows` (the extra rows land in the scratch output, then the real ones are
// copied out).
void run_cublaslt(const Fp8LinearArgs& args, const QuantizedX& x, int64_t padded_rows,
                  gpuStream_t stream) {
  const Device device = args.out.device();
  // A fixed input scale is written per row like a dynamic one (cuBLASLt has no per-channel
  // weight with a scalar x: measured, "an unsupported value").
  const int x_mode = args.block_scaled || args.activation == Fp8ActivationScale::group
                         ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
                         : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  const int weight_mode = args.block_scaled ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                                            : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  const int64_t m = padded_rows;
  const Fp8PlanKey key{device.index,      m,     args.n, args.k, static_cast<int>(args.out.dtype()),
                       args.block_scaled, x_mode};
  static std::mutex mutex;
  static std::map<Fp8PlanKey, std::unique_ptr<Fp8Plan>> plans;
  const void* weight_scales = args.weight_scale.data_ptr();
  if (args.block_scaled && args.weight_scale.size(1) % kBlockScaleRowAlignment != 0) {
    const int64_t row_blocks = args.weight_scale.size(0), column_blocks = args.weight_scale.size(1);
    const int64_t padded_columns = round_up(column_blocks, kBlockScaleRowAlignment);
    pad_block_scales_kernel<<<grid_size(row_blocks * padded_columns, 256), 256, 0, stream>>>(
        static_cast<const float*>(weight_scales), row_blocks, column_blocks, padded_columns,
        x.padded_weight_scales);
    GPU_CHECK_LAUNCH("pad the 128x128 block scales");
    weight_scales = x.padded_weight_scales;
  }
  void* out = m == args.m ? args.out.data_ptr() : x.padded_out;
  with_blas_lt(device, stream, [&](cublasLtHandle_t handle, void* workspace) {
    std::lock_guard<std::mutex> lock(mutex);
    std::unique_ptr<Fp8Plan>& plan = plans[key];
    if (plan == nullptr) {
      auto made = std::make_unique<Fp8Plan>();
      GPUBLAS_CHECK(
          cublasLtMatmulDescCreate(made->matmul.address(), CUBLAS_COMPUTE_32F, CUDA_R_32F));
      set_attribute(made->matmul, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
      set_attribute(made->matmul, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
      set_attribute(made->matmul, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, weight_mode);
      set_attribute(made->matmul, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, x_mode);
      GPUBLAS_CHECK(cublasLtMatrixLayoutCreate(made->weight.address(), CUDA_R_8F_E4M3, args.k,
                                               args.n, args.k));
      GPUBLAS_CHECK(
          cublasLtMatrixLayoutCreate(made->x.address(), CUDA_R_8F_E4M3, args.k, m, args.k));
      GPUBLAS_CHECK(cublasLtMatrixLayoutCreate(made->out.address(), out_type(args.out.dtype()),
                                               args.n, m, args.n));
      LtPreference preference;
      GPUBLAS_CHECK(cublasLtMatmulPreferenceCreate(preference.address()));
      const size_t workspace_bytes = kWorkspaceBytes;
      GPUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
          preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
          sizeof(workspace_bytes)));
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      // The pointers must be set for the heuristic to see the scale modes' layouts.
      set_attribute(made->matmul, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, weight_scales);
      set_attribute(made->matmul, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                    static_cast<const void*>(x.scales));
      const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
          handle, made->matmul.get(), made->weight.get(), made->x.get(), made->out.get(),
          made->out.get(), preference.get(), 1, &result, &found);
      TESSERA_REQUIRE(status == CUBLAS_STATUS_SUCCESS && found > 0,
                      "fp8_linear on {}: cuBLASLt has no FP8 matmul for x [{}, {}] and weight "
                      "[{}, {}] with {} weight scales ({})",
                      device.str(), m, args.k, args.n, args.k,
                      args.block_scaled ? "128x128 block" : "per-channel",
                      cublasGetStatusString(status));
      made->algorithm = result.algo;
      plan = std::move(made);
    }
    set_attribute(plan->matmul, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, weight_scales);
    set_attribute(plan->matmul, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                  static_cast<const void*>(x.scales));
    const float alpha = 1.0f, beta = 0.0f;
    GPUBLAS_CHECK(cublasLtMatmul(handle, plan->matmul.get(), &alpha, args.weight.data_ptr(),
                                 plan->weight.get(), x.codes, plan->x.get(), &beta, out,
                                 plan->out.get(), out, plan->out.get(), &plan->algorithm, workspace,
                                 kWorkspaceBytes, stream));
  });
  if (out != args.out.data_ptr()) {  // the real rows are the padded output's first ones
    GPU_CHECK(gpuMemcpyAsync(args.out.data_ptr(), out, args.out.nbytes(), gpuMemcpyDeviceToDevice,
                             stream));
  }
}

template <typename T>
void launch_mma_gemv(const Fp8LinearArgs& args, const QuantizedX& x, int64_t x_groups,
                     gpuStream_t stream) {
  const auto launch = [&]<int Tiles>() {
    launch_programmatic(fp8_mma_gemv_kernel<T, Tiles>, static_cast<unsigned>(args.n / kMmaRows),
                        kMmaWarps * 32, 0, stream, args.out.device().index, args.m, args.n, args.k,
                        static_cast<const uint8_t*>(args.weight.data_ptr()),
                        static_cast<const float*>(args.weight_scale.data_ptr()), args.block_scaled,
                        static_cast<const uint8_t*>(x.codes), static_cast<const float*>(x.scales),
                        x_groups, static_cast<T*>(args.out.data_ptr()));
  };
  static_assert(kFp8GemvMaxRows <= 2 * kMmaTileTokens);
  if (args.m <= kMmaTileTokens) {
    launch.template operator()<1>();
  } else {
    launch.template operator()<2>();
  }
  GPU_CHECK_LAUNCH("fp8_mma_gemv");
}

void fp8_linear_entry(const KernelArgs& kernel_args) {
  const Fp8LinearArgs args = check_fp8_linear(kernel_args);
  const Device device = args.out.device();
  const DeviceLimits& limits = device_limits(device.index);
  TESSERA_REQUIRE(limits.compute_major >= 9,
                  "fp8_linear: {} has compute capability {}.x; Tessera's FP8 kernels need 9.0 "
                  "(Hopper) or newer: load a float checkpoint, without --quantization fp8",
                  device.str(), limits.compute_major);
  TESSERA_REQUIRE(args.k % kLaneColumns == 0 && args.n % kLaneColumns == 0,
                  "fp8_linear on {}: the weight [{}, {}] needs both sizes multiples of {} (FP8 "
                  "matmuls read whole 16-byte rows)",
                  device.str(), args.n, args.k, kLaneColumns);
  // The kernels read 16 bytes at a time: a whole tensor is that aligned, a view may not be.
  TESSERA_REQUIRE(reinterpret_cast<uintptr_t>(args.weight.data_ptr()) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(args.x.data_ptr()) % 16 == 0,
                  "fp8_linear on {}: the weight {} and x {} must start on 16-byte boundaries",
                  device.str(), args.weight.str(), args.x.str());
  if (args.out.numel() == 0) return;
  LaunchScope scope(device);
  const gpuStream_t stream = scope.stream();
  // x's scale groups: 128 columns where the weight's scales or x's own change every 128 columns.
  const bool grouped = args.block_scaled || args.activation == Fp8ActivationScale::group;
  const int64_t group = grouped ? kFp8Block : args.k;
  const int64_t groups = (args.k + group - 1) / group;
  const bool gemv = args.m <= kFp8GemvMaxRows;
  // cuBLASLt's FP8 matmuls take rows of x in multiples of 4 (measured: 9 rows have no algorithm
  // with block scales); the padding rows are zeros.
  const int64_t rows = gemv ? args.m : round_up(args.m, kPaddedRows);
  const int64_t padded_out_bytes =
      rows == args.m ? 0 : rows * args.n * static_cast<int64_t>(element_size(args.out.dtype()));
  const QuantizedX x = x_scratch(
      device, stream, rows, args.k, groups, padded_out_bytes,
      args.block_scaled
          ? args.weight_scale.size(0) * round_up(args.weight_scale.size(1), kBlockScaleRowAlignment)
          : 0);
  // cuBLASLt's VEC128 scales sit group-major, [groups][rows]; the gemv reads them row-major.
  const ScaleLayout layout{!gemv && grouped, rows, groups};
  // Per token, x's amax spans the row even where its scale repeats per 128 columns.
  const int64_t amax_group = args.activation == Fp8ActivationScale::group ? kFp8Block : args.k;
  const float* fixed = args.input_scale != nullptr
                           ? static_cast<const float*>(args.input_scale->data_ptr())
                           : nullptr;
  visit_device_float_dtype("fp8_linear", args.x.dtype(), [&]<typename T>() {
    launch_programmatic(quantize_x_kernel<T>, static_cast<unsigned>(rows), kQuantizeThreads, 0,
                        stream, device.index, static_cast<const T*>(args.x.data_ptr()), args.m,
                        args.k, amax_group, group, fixed, x.codes, x.scales, layout);
    GPU_CHECK_LAUNCH("quantize x to e4m3");
    if (gemv) {
      launch_mma_gemv<T>(args, x, groups, stream);
    } else {
      run_cublaslt(args, x, rows, stream);
    }
  });
  annotate_launch(gemv ? "fp8_gemv" : "cublaslt_fp8");
}

TESSERA_REGISTER_KERNEL("fp8_linear", kGpuDeviceType, fp8_linear_entry);

}  // namespace
}  // namespace tessera::gpu
