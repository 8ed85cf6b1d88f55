// Tessera's own GEMMs (portable_gemm.h), plain f32 FMA on any GPU either vendor makes: no tensor
// cores, no vendor library, so one source serves CUDA and HIP.
//
// Tiled: each block computes a 64 x 64 tile of the output from 16-wide slices of K staged in
// shared memory as f32; each of its 256 threads owns a 4 x 4 grid of outputs strided by 16, so the
// threads of a warp read shared memory without conflicts on both vendors. Nothing in it depends
// on the warp width.
//
// Skinny (linear over at most kSkinnyMaxRows rows, the decode shape): one warp (wavefront) per
// output column; its lanes stream the column's weight row in 16-byte packs, each weight multiplied
// into every row's accumulator, then the lanes' partial sums meet through shuffles over the warp
// width kWarp, which is the kernel's template parameter (32 on CUDA, 64 on AMD).
#include "kernels/cuda/gemm/portable_gemm.h"

#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm/fma_tile.cuh"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/kernel_checks.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

constexpr int kTileM = 64;
constexpr int kTileN = 64;
constexpr int kTileK = 16;
constexpr int kTiledThreads = 256;  // 16 x 16 threads
constexpr int kThreadsPerSide = 16;
constexpr int kOutputsPerSide = kTileM / kThreadsPerSide;  // each thread: 4 x 4 outputs
static_assert(kTileM == kTileN && kThreadsPerSide * kThreadsPerSide == kTiledThreads);

constexpr int kSkinnyThreads = 256;

// Sizes and the elements between batches (0 when an operand is shared by every batch).
struct GemmSizes {
  int64_t m = 0, n = 0, k = 0;
  int64_t stride_a = 0, stride_b = 0, stride_out = 0;
};

template <typename T>
__device__ __forceinline__ float load_float(const T* pointer, int64_t index) {
  return to_float(pointer[index]);
}

// out[m, n] = a[m, k] @ op(b) (+ bias[n]): b is [k, n], or [n, k] read transposed (kTransposedB,
// linear's weight). blockIdx.z is the batch.
template <typename T, bool kTransposedB>
__global__ void __launch_bounds__(kTiledThreads)
    tiled_gemm_kernel(const T* a, const T* b, const T* bias, T* out, GemmSizes sizes) {
  __shared__ float a_tile[kTileK][kTileM];
  __shared__ float b_tile[kTileK][kTileN];
  const int64_t batch = blockIdx.z;
  a += batch * sizes.stride_a;
  b += batch * sizes.stride_b;
  out += batch * sizes.stride_out;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTileM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const int tx = static_cast<int>(threadIdx.x) % kThreadsPerSide;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsPerSide;
  float acc[kOutputsPerSide][kOutputsPerSide] = {};

  for (int64_t k0 = 0; k0 < sizes.k; k0 += kTileK) {
    // Consecutive threads read consecutive addresses: along K in a (and a transposed b), along N
    // in a plain b. Past the edges the tiles hold zeros, which add nothing.
    for (int e = threadIdx.x; e < kTileM * kTileK; e += kTiledThreads) {
      const int r = e / kTileK, c = e % kTileK;
      const int64_t row = row0 + r, kk = k0 + c;
      a_tile[c][r] = row < sizes.m && kk < sizes.k ? load_float(a, row * sizes.k + kk) : 0.0f;
    }
    for (int e = threadIdx.x; e < kTileN * kTileK; e += kTiledThreads) {
      if constexpr (kTransposedB) {
        const int r = e / kTileK, c = e % kTileK;
        const int64_t col = col0 + r, kk = k0 + c;
        b_tile[c][r] = col < sizes.n && kk < sizes.k ? load_float(b, col * sizes.k + kk) : 0.0f;
      } else {
        const int r = e / kTileN, c = e % kTileN;
        const int64_t kk = k0 + r, col = col0 + c;
        b_tile[r][c] = kk < sizes.k && col < sizes.n ? load_float(b, kk * sizes.n + col) : 0.0f;
      }
    }
    __syncthreads();
    accumulate_fma_slice<kTileK, kTileM, kThreadsPerSide>(a_tile, b_tile, tx, ty, acc);
    __syncthreads();  // the tiles are read; the next slice may overwrite them
  }

#pragma unroll
  for (int i = 0; i < kOutputsPerSide; ++i) {
    const int64_t row = row0 + ty + kThreadsPerSide * i;
    if (row >= sizes.m) continue;
#pragma unroll
    for (int j = 0; j < kOutputsPerSide; ++j) {
      const int64_t col = col0 + tx + kThreadsPerSide * j;
      if (col >= sizes.n) continue;
      const float sum = acc[i][j] + (bias != nullptr ? load_float(bias, col) : 0.0f);
      out[row * sizes.n + col] = from_compute<T>(sum);
    }
  }
}

// The sum of `value` over the kWarp lanes of a warp; every lane gets it.
template <int kWarp>
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int mask = kWarp / 2; mask > 0; mask /= 2) value += GPU_SHFL_XOR(value, mask);
  return value;
}

// E consecutive elements as f32: one packed access when E > 1 (the caller guarantees alignment).
template <int E, typename T>
__device__ __forceinline__ void load_floats(const T* pointer, float (&values)[E]) {
  if constexpr (E == 1) {
    values[0] = to_float(*pointer);
  } else {
    const Pack<T, E> pack = load_pack<E>(pointer);
#pragma unroll
    for (int e = 0; e < E; ++e) values[e] = to_float(pack.values[e]);
  }
}

// out[rows, n] = x[rows, k] @ weight[n, k]^T (+ bias[n]) for rows <= kSkinnyMaxRows: warp w of
// block b computes column b * (kSkinnyThreads / kWarp) + w. E elements per load: a 16-byte pack,
// or 1 when K or the pointers do not allow packs.
template <typename T, int kWarp, int E>
__global__ void __launch_bounds__(kSkinnyThreads)
    skinny_linear_kernel(const T* x, const T* weight, const T* bias, T* out, int64_t rows,
                         int64_t n, int64_t k) {
  constexpr int kWarps = kSkinnyThreads / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarp;
  if (col >= n) return;  // the whole warp: col is the same on every lane
  const T* weight_row = weight + col * k;
  float acc[kSkinnyMaxRows] = {};
  for (int64_t base = static_cast<int64_t>(lane) * E; base < k;
       base += static_cast<int64_t>(kWarp) * E) {
    float weights[E];
    load_floats<E>(weight_row + base, weights);
#pragma unroll
    for (int r = 0; r < kSkinnyMaxRows; ++r) {
      if (r < rows) {
        float inputs[E];
        load_floats<E>(x + r * k + base, inputs);
#pragma unroll
        for (int e = 0; e < E; ++e) acc[r] = fmaf(weights[e], inputs[e], acc[r]);
      }
    }
  }
  const float bias_value = bias != nullptr ? load_float(bias, col) : 0.0f;
#pragma unroll
  for (int r = 0; r < kSkinnyMaxRows; ++r) {
    if (r < rows) {
      const float sum = warp_sum<kWarp>(acc[r]);
      if (lane == 0) out[r * n + col] = from_compute<T>(sum + bias_value);
    }
  }
}

int64_t checked_grid(const char* op, const char* what, int64_t blocks, int64_t limit) {
  TESSERA_REQUIRE(blocks <= limit, "{}: {} needs {} blocks, more than the {} one launch takes", op,
                  what, blocks, limit);
  return blocks;
}

template <typename T>
void launch_tiled(const char* op, const T* a, const T* b, const T* bias, T* out,
                  const GemmSizes& sizes, int64_t batches, bool transposed_b, gpuStream_t stream) {
  const dim3 grid(
      static_cast<unsigned int>(
          checked_grid(op, "N", ceil_div(sizes.n, kTileN), int64_t{INT32_MAX})),
      static_cast<unsigned int>(checked_grid(op, "M", ceil_div(sizes.m, kTileM), 65535)),
      static_cast<unsigned int>(checked_grid(op, "the batch", batches, 65535)));
  if (transposed_b) {
    tiled_gemm_kernel<T, true><<<grid, kTiledThreads, 0, stream>>>(a, b, bias, out, sizes);
  } else {
    tiled_gemm_kernel<T, false><<<grid, kTiledThreads, 0, stream>>>(a, b, bias, out, sizes);
  }
  GPU_CHECK_LAUNCH("portable tiled GEMM");
}

template <typename T>
void launch_skinny(const T* x, const T* weight, const T* bias, T* out, const GemmSizes& sizes,
                   gpuStream_t stream) {
  constexpr int kWarp = GPU_WARP_SIZE;
  constexpr int V = kPackElements<T>;
  const bool packed = sizes.k % V == 0 && pack_aligned<T, V>(x) && pack_aligned<T, V>(weight);
  const auto blocks = static_cast<unsigned int>(
      checked_grid("linear", "N", ceil_div(sizes.n, kSkinnyThreads / kWarp), int64_t{INT32_MAX}));
  if (packed) {
    skinny_linear_kernel<T, kWarp, V>
        <<<blocks, kSkinnyThreads, 0, stream>>>(x, weight, bias, out, sizes.m, sizes.n, sizes.k);
  } else {
    skinny_linear_kernel<T, kWarp, 1>
        <<<blocks, kSkinnyThreads, 0, stream>>>(x, weight, bias, out, sizes.m, sizes.n, sizes.k);
  }
  GPU_CHECK_LAUNCH("portable skinny linear");
}

template <typename T>
const T* typed(const Tensor* tensor) {
  return tensor != nullptr ? static_cast<const T*>(tensor->data_ptr()) : nullptr;
}

// On CUDA, cuBLASLt serves matmul and linear (gemm.cpp); ROCm in Debian has no BLAS.
#if defined(TESSERA_GPU_HIP)
void matmul_entry(const KernelArgs& args) {
  portable_matmul(args.inputs[0], args.inputs[1], args.outputs[0]);
}

void linear_entry(const KernelArgs& args) {
  portable_linear(args.inputs[0], args.inputs[1],
                  args.inputs.size() == 3 ? &args.inputs[2] : nullptr, args.outputs[0]);
}

TESSERA_REGISTER_KERNEL("matmul", kGpuDeviceType, matmul_entry);
TESSERA_REGISTER_KERNEL("linear", kGpuDeviceType, linear_entry);
#endif

}  // namespace

void portable_matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const MatmulShape shape = check_matmul(a, b, out);
  if (out.numel() == 0) return;
  GemmSizes sizes;
  sizes.m = shape.m;
  sizes.n = shape.n;
  sizes.k = shape.k;
  if (shape.batched) {
    sizes.stride_a = shape.m * shape.k;
    sizes.stride_b = shape.k * shape.n;
    sizes.stride_out = shape.m * shape.n;
  }
  LaunchScope scope(out.device());
  visit_device_float_dtype("matmul", a.dtype(), [&]<typename T>() {
    launch_tiled<T>("matmul", typed<T>(&a), typed<T>(&b), nullptr, static_cast<T*>(out.data_ptr()),
                    sizes, shape.batches, false, scope.stream());
  });
}

void portable_linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out,
                     PortableGemmKernel kernel) {
  const MatmulShape shape = check_linear(x, weight, bias, out);
  if (kernel == PortableGemmKernel::automatic) {
    kernel = shape.m <= kSkinnyMaxRows ? PortableGemmKernel::skinny : PortableGemmKernel::tiled;
  }
  TESSERA_REQUIRE(kernel != PortableGemmKernel::skinny || shape.m <= kSkinnyMaxRows,
                  "linear: the skinny kernel takes at most {} rows, x {} has {}", kSkinnyMaxRows,
                  x.str(), shape.m);
  if (out.numel() == 0) return;
  GemmSizes sizes;
  sizes.m = shape.m;
  sizes.n = shape.n;
  sizes.k = shape.k;
  LaunchScope scope(out.device());
  visit_device_float_dtype("linear", x.dtype(), [&]<typename T>() {
    T* out_data = static_cast<T*>(out.data_ptr());
    if (kernel == PortableGemmKernel::skinny) {
      launch_skinny<T>(typed<T>(&x), typed<T>(&weight), typed<T>(bias), out_data, sizes,
                       scope.stream());
    } else {
      launch_tiled<T>("linear", typed<T>(&x), typed<T>(&weight), typed<T>(bias), out_data, sizes, 1,
                      true, scope.stream());
    }
  });
}

}  // namespace tessera::gpu
