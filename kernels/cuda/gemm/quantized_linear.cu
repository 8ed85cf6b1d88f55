#include "kernels/cuda/gemm/quantized_linear.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm/cold_timer.h"
#include "kernels/cuda/gemm/kept_scratch.h"
#include "kernels/cuda/gemm/measured_device.h"
#include "kernels/cuda/gemm/quantized_blocks.cuh"
#include "kernels/cuda/gemm/quantized_dot.cuh"
#include "kernels/cuda/gemm/quantized_mma.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/measured_choices.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

constexpr int kWarpSize = 32;
constexpr int kGemvWarps = 4;    // weight rows per block of the gemv
constexpr int kGemvRowTile = 8;  // rows of x per pass over a weight row
// The tiles path's scratch per device and stream: the dequantized tile and the partial product
// take at most half each.
constexpr int64_t kTilesWorkspaceBytes = int64_t{64} << 20;

// out[(first + r) * n + row] = the warp's sum of sums[r] (+ bias[row]), for the rows r < Rows
// of x that exist (first + r < m).
template <int Rows, typename T>
__device__ __forceinline__ void write_row_sums(const float* sums, int lane, int64_t first,
                                               int64_t m, int64_t n, int64_t row, const T* bias,
                                               T* out) {
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
    float sum = sums[r];
#pragma unroll
    for (int mask = kWarpSize / 2; mask > 0; mask /= 2) sum += GPU_SHFL_XOR(sum, mask);
    if (lane == 0 && first + r < m) {
      if (bias != nullptr) sum += to_float(bias[row]);
      out[(first + r) * n + row] = from_compute<T>(sum);
    }
  }
}

// One warp per weight row; lane l takes the row's chunks of 32 l, l + 32, ...; x's rows in passes
// of kGemvRowTile (the weight row is read once per pass, from L1/L2 after the first).
template <DType D, typename T>
__global__ void quantized_gemv_kernel(int64_t m, int64_t n, int64_t k, const uint8_t* weight,
                                      const T* x, const T* bias, T* out) {
  using Layout = BlockLayout<D>;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const int64_t chunks = k / 32;
  const uint8_t* weight_row = weight + row * (k / Layout::elements) * Layout::bytes;
  for (int64_t first = 0; first < m; first += kGemvRowTile) {
    float sums[kGemvRowTile] = {};
    for (int64_t c = lane; c < chunks; c += kWarpSize) {
      float values[32];
      const int64_t element = c * 32;
      dequantize_chunk<D>(weight_row + (element / Layout::elements) * Layout::bytes,
                          static_cast<int>((element % Layout::elements) / 32), values);
#pragma unroll
      for (int r = 0; r < kGemvRowTile; ++r) {
        if (first + r >= m) break;
        const T* x_chunk = x + (first + r) * k + element;
        float sum = 0;
#pragma unroll
        for (int i = 0; i < 32; ++i) sum = fmaf(values[i], to_float(x_chunk[i]), sum);
        sums[r] += sum;
      }
    }
    write_row_sums<kGemvRowTile>(sums, lane, first, m, n, row, bias, out);
  }
}

// x [values / k, k] quantized as the CPU quantizes activations (quant::quantize_activation, the
// same float operations): a thread takes 8 consecutive values, Group / 8 threads share a scale
// (the largest magnitude over 127), quants rounded to nearest even; sums of the quants per 16.
template <int Group, typename T>
__global__ void quantize_activation_kernel(int64_t values, const T* x, int8_t* quants,
                                           float* scales, int16_t* group_sums) {
  static_assert(Group % 32 == 0 && Group <= 256, "a scale group is whole blocks within a warp");
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  const bool active = first < values;  // whole groups are active or not: values % Group == 0
  allow_next_grid();                   // the gemv after may start loading its weights
  wait_for_prior_grids();
  float value[8] = {};
  if (active) {
#pragma unroll
    for (int i = 0; i < 8; ++i) value[i] = to_float(x[first + i]);
  }
  float largest = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) largest = fmaxf(largest, fabsf(value[i]));
#pragma unroll
  for (int mask = 1; mask < Group / 8; mask *= 2)
    largest = fmaxf(largest, GPU_SHFL_XOR(largest, mask));
  const float scale = __fdiv_rn(largest, 127.0f);
  const float inverse = largest > 0 ? __fdiv_rn(127.0f, largest) : 0.0f;
  int sum = 0;
  uint32_t packed[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int quant = min(max(__float2int_rn(__fmul_rn(value[i], inverse)), -127), 127);
    packed[i / 4] |= (static_cast<uint32_t>(quant) & 0xFFu) << (8 * (i % 4));
    sum += quant;
  }
  sum += GPU_SHFL_XOR(sum, 1);
  if (!active) return;
  *reinterpret_cast<uint2*>(quants + first) = make_uint2(packed[0], packed[1]);
  if (threadIdx.x % 4 == 0) scales[first / 32] = scale;
  if (threadIdx.x % 2 == 0) group_sums[first / 16] = static_cast<int16_t>(sum);
}

// Blocks of the integer gemv an SM should hold at once (its registers at most 128: more warps
// keep more weight bytes in flight).
constexpr int kDp4aMinBlocks = 4;

// The integer gemv: one warp per weight row, kGemvWarps rows per block. A lane takes part `part`
// of every (32 / lanes_per_block)-th block of the row, Dot::depth of them loaded ahead, and meets
// each with Rows rows of the quantized x at a time (read through L1).
template <DType D, typename T, int Rows>
__global__ void __launch_bounds__(kGemvWarps* kWarpSize, kDp4aMinBlocks)
    quantized_dp4a_gemv_kernel(int64_t m, int64_t n, int64_t k, const uint8_t* __restrict__ weight,
                               const int8_t* __restrict__ quants, const float* __restrict__ scales,
                               const int16_t* __restrict__ group_sums, const T* bias, T* out) {
  using Layout = BlockLayout<D>;
  using Dot = Dp4aDot<D>;
  constexpr int kBlocksPerPass = kWarpSize / Dot::lanes_per_block;
  const int lane = threadIdx.x % kWarpSize, part = lane % Dot::lanes_per_block;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / kWarpSize;
  if (row >= n) return;
  const int64_t blocks = k / Layout::elements, start = lane / Dot::lanes_per_block;
  const uint8_t* weight_row = weight + row * blocks * Layout::bytes;
  for (int64_t first = 0; first < m; first += Rows) {
    typename Dot::Raw parts[Dot::depth] = {};
#pragma unroll
    for (int i = 0; i < Dot::depth; ++i) {
      const int64_t b = start + i * kBlocksPerPass;
      if (b < blocks) parts[i] = Dot::load(weight_row + b * Layout::bytes, part);
    }
    // The weights are constants; x's quants come from the kernel before (programmatic launch).
    if (first == 0) {
      wait_for_prior_grids();
      allow_next_grid();
    }
    float sums[Rows] = {};
    for (int64_t pass = start; pass < blocks; pass += Dot::depth * kBlocksPerPass) {
#pragma unroll
      for (int i = 0; i < Dot::depth; ++i) {
        const int64_t b = pass + i * kBlocksPerPass;
        if (b >= blocks) break;
        const typename Dot::Part weights = Dot::decode(parts[i], part);
#pragma unroll
        for (int r = 0; r < Rows; ++r) {
          if (first + r >= m) break;
          const int64_t at = (first + r) * k + b * Layout::elements;
          sums[r] += Dot::dot(weights, part,
                              ActivationAt{quants + at, scales + at / 32, group_sums + at / 16});
        }
        const int64_t next = b + Dot::depth * kBlocksPerPass;
        if (next < blocks) parts[i] = Dot::load(weight_row + next * Layout::bytes, part);
      }
    }
    write_row_sums<Rows>(sums, lane, first, m, n, row, bias, out);
  }
}

// Writes 32 values to 64-byte aligned T storage in 16-byte stores (a warp's stores then cover
// whole sectors instead of one element each).
template <typename T>
__device__ __forceinline__ void store_chunk(const float* values, T* destination) {
  alignas(16) T converted[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) converted[i] = from_compute<T>(values[i]);
  constexpr int kStores = 32 * sizeof(T) / 16;
#pragma unroll
  for (int i = 0; i < kStores; ++i)
    reinterpret_cast<uint4*>(destination)[i] = reinterpret_cast<const uint4*>(converted)[i];
}

// tile[r, :] = weight row first + r, dequantized to T: one warp-wide chunk loop per row.
template <DType D, typename T>
__global__ void dequantize_rows_kernel(int64_t rows, int64_t k, const uint8_t* weight, T* tile) {
  using Layout = BlockLayout<D>;
  const int64_t chunks = k / 32;
  const int64_t row_bytes = (k / Layout::elements) * Layout::bytes;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       index < rows * chunks; index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = index / chunks, element = (index % chunks) * 32;
    float values[32];
    dequantize_chunk<D>(weight + row * row_bytes + (element / Layout::elements) * Layout::bytes,
                        static_cast<int>((element % Layout::elements) / 32), values);
    store_chunk(values, tile + row * k + element);
  }
}

template <DType D, typename Id>
__global__ void quantized_embedding_kernel(int64_t count, int64_t vocab, int64_t vocab_start,
                                           int64_t width, const Id* ids, const uint8_t* weight,
                                           float* out) {
  using Layout = BlockLayout<D>;
  const int64_t row_bytes = (width / Layout::elements) * Layout::bytes;
  for (int64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const int64_t id = static_cast<int64_t>(ids[i]) - vocab_start;
    float* destination = out + i * width;
    for (int64_t element = 32 * threadIdx.x; element < width; element += 32 * blockDim.x) {
      float values[32] = {};
      if (id >= 0 && id < vocab)
        dequantize_chunk<D>(weight + id * row_bytes + (element / Layout::elements) * Layout::bytes,
                            static_cast<int>((element % Layout::elements) / 32), values);
#pragma unroll
      for (int j = 0; j < 32; ++j) destination[element + j] = values[j];
    }
  }
}

const uint8_t* blocks_of(const Tensor& weight) {
  return static_cast<const uint8_t*>(weight.data_ptr());
}

enum class QuantizedPath { gemv, mma, tiles };
constexpr QuantizedPath kQuantizedPaths[] = {QuantizedPath::gemv, QuantizedPath::mma,
                                             QuantizedPath::tiles};

const char* path_name(QuantizedPath path) {
  switch (path) {
    case QuantizedPath::gemv:
      return "gemv";
    case QuantizedPath::mma:
      return "mma";
    default:
      return "tiles";
  }
}

// The measured path per problem: (format, x dtype, rows, n, k, device).
using PathKey = std::tuple<DType, DType, int64_t, int64_t, int64_t, int>;
std::mutex& paths_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::map<PathKey, QuantizedPath>& measured_paths() {
  static std::map<PathKey, QuantizedPath> paths;
  return paths;
}

void run_path(QuantizedPath path, const Tensor& x, const Tensor& weight, const Tensor* bias,
              const Tensor& out) {
  switch (path) {
    case QuantizedPath::gemv:
      return quantized_linear_gemv(x, weight, bias, out);
    case QuantizedPath::mma:
      return quantized_linear_mma(x, weight, bias, out);
    default:
      return quantized_linear_tiles(x, weight, bias, out);
  }
}

// The path of a problem: measured on its first call outside a capture, or taken from the
// measured-choice store (kernels/measured_choices.h) when an earlier process measured it (then a
// capture may take it too); a shape first seen while capturing takes the gemv up to its row limit.
QuantizedPath choose_path(const Tensor& x, const Tensor& weight, const Tensor* bias,
                          const Tensor& out, int64_t m) {
  if (m > kQuantizedGemvMaxRows) return QuantizedPath::tiles;  // the gemv cannot run it
  const int device = out.device().index;
  const PathKey key{weight.dtype(), x.dtype(), m, weight.size(0), weight.size(1), device};
  {
    std::lock_guard<std::mutex> lock(paths_mutex());
    auto it = measured_paths().find(key);
    if (it != measured_paths().end()) return it->second;
  }
  const auto keep = [&](QuantizedPath path) {
    std::lock_guard<std::mutex> lock(paths_mutex());
    return measured_paths().emplace(key, path).first->second;
  };
  const std::string problem =
      std::string("quantized_linear ") + dtype_name(weight.dtype()) + " x " +
      dtype_name(x.dtype()) + " m " + std::to_string(m) + " n " + std::to_string(weight.size(0)) +
      " k " + std::to_string(weight.size(1)) + " bias " + (bias != nullptr ? "1" : "0");
  const bool mma = quantized_mma_fits(weight);
  if (const std::optional<std::string> stored =
          find_measured_choice(measured_device(device), problem)) {
    for (QuantizedPath path : kQuantizedPaths)
      if (*stored == path_name(path) && (path != QuantizedPath::mma || mma)) return keep(path);
    // Anything else (a stale or edited file) is measured again below and replaced. (No log here:
    // spdlog in this CUDA file brings long double into its device pass.)
  }
  LaunchScope scope(out.device());
  if (stream_capturing(scope.stream())) return QuantizedPath::gemv;  // timing cannot run there
  std::lock_guard<std::recursive_mutex> measuring(ColdTimer::measuring_mutex(device));
  ColdTimer timer(out.device());
  QuantizedPath chosen = QuantizedPath::gemv;
  float fastest_ms = 0;
  for (QuantizedPath path : kQuantizedPaths) {
    if (path == QuantizedPath::mma && !mma) continue;
    const float ms =
        timer.median_graph_ms([&] { run_path(path, x, weight, bias, out); }, TimedAfter::nothing);
    if (path == QuantizedPath::gemv || ms < fastest_ms) {
      chosen = path;
      fastest_ms = ms;
    }
  }
  record_measured_choice(measured_device(device), problem, path_name(chosen));
  return keep(chosen);
}

}  // namespace

bool quantized_mma_fits(const Tensor& weight) {
  // Its loads need the blocks as aligned as a whole tensor's are (a view may start anywhere).
  return quantized_mma_available(weight.dtype()) &&
         reinterpret_cast<uintptr_t>(weight.data_ptr()) % 16 == 0;
}

bool quantized_gemv_quantizes_activations(const Tensor& weight) {
  bool available = false;
  visit_quantized_dtype(weight.dtype(), [&]<DType D>() {
    // Its loads need the blocks as aligned as a whole tensor's are (a view may start anywhere).
    const uintptr_t alignment = BlockLayout<D>::bytes % 16 == 0 ? 16 : 2;
    available =
        Dp4aDot<D>::available && reinterpret_cast<uintptr_t>(weight.data_ptr()) % alignment == 0;
  });
  return available;
}

namespace {

// x [m, k] quantized as the CPU quantizes it for `D`'s dot products (scale groups of D's block),
// into the kept scratch of `stream`.
template <DType D, typename T>
QuantizedRows quantize_rows(const Tensor& x, int64_t values, Device device, gpuStream_t stream) {
  // x's quants (m k bytes), scales (an f32 per 32 values) and sums (an int16 per 16).
  auto* quants = static_cast<int8_t*>(
      kept_scratch(device, stream, values + values / 8 + values / 8, "quantized x"));
  auto* scales = reinterpret_cast<float*>(quants + values);
  auto* group_sums = reinterpret_cast<int16_t*>(quants + values + values / 8);
  constexpr int kQuantizeThreads = 256;
  launch_programmatic(quantize_activation_kernel<BlockLayout<D>::elements, T>,
                      grid_size(values / 8, kQuantizeThreads), kQuantizeThreads, 0, stream,
                      device.index, values, static_cast<const T*>(x.data_ptr()), quants, scales,
                      group_sums);
  GPU_CHECK_LAUNCH("quantize the activations");
  return QuantizedRows{quants, scales, group_sums};
}

template <DType D, typename T>
void launch_dp4a_gemv(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out,
                      gpuStream_t stream) {
  if constexpr (Dp4aDot<D>::available) {
    const int64_t n = weight.size(0), k = weight.size(1), m = x.numel() / k;
    const int device = out.device().index;
    const QuantizedRows rows = quantize_rows<D, T>(x, m * k, out.device(), stream);
    const T* bias_data = bias != nullptr ? static_cast<const T*>(bias->data_ptr()) : nullptr;
    T* out_data = static_cast<T*>(out.data_ptr());
    const auto launch = [&]<int Rows>() {
      launch_programmatic(quantized_dp4a_gemv_kernel<D, T, Rows>, grid_size(n, kGemvWarps),
                          kGemvWarps * kWarpSize, 0, stream, device, m, n, k, blocks_of(weight),
                          rows.quants, rows.scales, rows.group_sums, bias_data, out_data);
    };
    if (m == 1) {
      launch.template operator()<1>();
    } else if (m == 2) {
      launch.template operator()<2>();
    } else if (m <= 4) {
      launch.template operator()<4>();
    } else {
      launch.template operator()<8>();
    }
    GPU_CHECK_LAUNCH("quantized linear (integer gemv)");
  }
}

}  // namespace

void quantized_linear_gemv(const Tensor& x, const Tensor& weight, const Tensor* bias,
                           const Tensor& out) {
  const int64_t n = weight.size(0), k = weight.size(1), m = x.numel() / k;
  TESSERA_CHECK(m <= kQuantizedGemvMaxRows, "quantized gemv of {} rows", m);
  LaunchScope scope(out.device());
  const bool dp4a = quantized_gemv_quantizes_activations(weight);
  visit_quantized_dtype(weight.dtype(), [&]<DType D>() {
    visit_device_float_dtype("linear", x.dtype(), [&]<typename T>() {
      if (dp4a) return launch_dp4a_gemv<D, T>(x, weight, bias, out, scope.stream());
      quantized_gemv_kernel<D, T>
          <<<grid_size(n, kGemvWarps), kGemvWarps * kWarpSize, 0, scope.stream()>>>(
              m, n, k, blocks_of(weight), static_cast<const T*>(x.data_ptr()),
              bias != nullptr ? static_cast<const T*>(bias->data_ptr()) : nullptr,
              static_cast<T*>(out.data_ptr()));
    });
  });
  GPU_CHECK_LAUNCH("quantized linear (gemv)");
}

void quantized_linear_mma(const Tensor& x, const Tensor& weight, const Tensor* bias,
                          const Tensor& out) {
  const int64_t n = weight.size(0), k = weight.size(1), m = x.numel() / k;
  TESSERA_CHECK(m <= kQuantizedGemvMaxRows && quantized_mma_fits(weight),
                "quantized mma of {} rows of {}", m, dtype_name(weight.dtype()));
  LaunchScope scope(out.device());
  visit_quantized_dtype(weight.dtype(), [&]<DType D>() {
    visit_device_float_dtype("linear", x.dtype(), [&]<typename T>() {
      const QuantizedRows rows = quantize_rows<D, T>(x, m * k, out.device(), scope.stream());
      launch_quantized_mma(D, x.dtype(), m, n, k, blocks_of(weight), rows,
                           bias != nullptr ? bias->data_ptr() : nullptr, out.data_ptr(),
                           scope.stream(), out.device().index);
    });
  });
}

void quantized_linear_tiles(const Tensor& x, const Tensor& weight, const Tensor* bias,
                            const Tensor& out) {
  const int64_t n = weight.size(0), k = weight.size(1), m = x.numel() / k;
  const int64_t element_bytes = static_cast<int64_t>(element_size(x.dtype()));
  // Rows of the tile: each half of the workspace holds the tile or the partial product [m, rows].
  const int64_t half = kTilesWorkspaceBytes / 2;
  const int64_t tile_rows =
      std::clamp<int64_t>(std::min(half / (k * element_bytes), half / (m * element_bytes)), 1, n);
  TESSERA_REQUIRE(
      tile_rows * k * element_bytes <= half && m * tile_rows * element_bytes <= half,
      "linear with a quantized weight of rows {} wide over {} rows of x needs more than "
      "the {} MiB scratch of its dequantized tiles; split the batch (fewer tokens per "
      "step)",
      k, m, kTilesWorkspaceBytes >> 20);
  const Tensor x_rows = x.view({m, k});
  Tensor out_rows = out.view({m, n});
  const size_t weight_row_bytes = static_cast<size_t>(storage_bytes(weight.dtype(), k));
  std::byte* workspace = nullptr;
  {
    LaunchScope scope(out.device());
    workspace = static_cast<std::byte*>(
        kept_scratch(out.device(), scope.stream(), kTilesWorkspaceBytes, "dequantized tiles"));
  }
  const Tensor tile = Tensor::from_blob(workspace, {tile_rows, k}, x.dtype(), out.device());
  for (int64_t first = 0; first < n; first += tile_rows) {
    const int64_t rows = std::min(tile_rows, n - first);
    {
      LaunchScope scope(out.device());
      visit_quantized_dtype(weight.dtype(), [&]<DType D>() {
        visit_device_float_dtype("linear", x.dtype(), [&]<typename T>() {
          dequantize_rows_kernel<D, T><<<grid_size(rows * (k / 32), 256), 256, 0, scope.stream()>>>(
              rows, k, blocks_of(weight) + first * weight_row_bytes,
              static_cast<T*>(tile.data_ptr()));
        });
      });
      GPU_CHECK_LAUNCH("quantized linear (dequantize a tile)");
    }
    const Tensor weight_tile = tile.slice(0, 0, rows);
    std::vector<Tensor> inputs{x_rows, weight_tile};
    if (bias != nullptr) inputs.push_back(bias->slice(0, first, first + rows));
    if (rows == n) {
      run_kernel("linear", out.device().type,
                 KernelArgs{inputs, Attributes{}, std::span(&out_rows, 1)});
      continue;
    }
    Tensor partial = Tensor::from_blob(workspace + half, {m, rows}, x.dtype(), out.device());
    run_kernel("linear", out.device().type,
               KernelArgs{inputs, Attributes{}, std::span(&partial, 1)});
    out_rows.slice(1, first, first + rows).copy_from(partial);
  }
}

void quantized_linear(const Tensor& x, const Tensor& weight, const Tensor* bias,
                      const Tensor& out) {
  const int64_t m = x.numel() / weight.size(1);
  run_path(choose_path(x, weight, bias, out, m), x, weight, bias, out);
}

void quantized_embedding(const Tensor& weight, const Tensor& ids, int64_t vocab_start,
                         const Tensor& out) {
  const int64_t count = ids.numel(), vocab = weight.size(0), width = weight.size(1);
  if (count == 0) return;
  LaunchScope scope(out.device());
  visit_quantized_dtype(weight.dtype(), [&]<DType D>() {
    visit_device_dtype(ids.dtype(), [&]<typename Id>() {
      if constexpr (std::is_integral_v<Id>) {
        quantized_embedding_kernel<D, Id><<<grid_size(count, 1), 64, 0, scope.stream()>>>(
            count, vocab, vocab_start, width, static_cast<const Id*>(ids.data_ptr()),
            blocks_of(weight), static_cast<float*>(out.data_ptr()));
      }
    });
  });
  GPU_CHECK_LAUNCH("quantized embedding");
}

}  // namespace tessera::gpu
