// Elementwise launches: out[i] = fn(inputs[i]...) over out's shape, every operand (out included)
// at its own strides (0 for broadcast dims). Dims that are contiguous in every operand are merged
// first, as on the CPU (kernels/cpu/strided_loop.h). When all operands then form one contiguous
// run with aligned pointers, each thread moves one 16-byte pack per operand; otherwise a
// grid-stride kernel computes every operand's offset from the element index.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gpu_runtime.h"
#include "runtime/check.h"
#include "runtime/tensor.h"

namespace tessera::gpu {

inline constexpr int kMaxDims = 8;
inline constexpr int kElementwiseThreads = 256;

// N operands (the output first) over one shape; dims innermost first, size-1 dims dropped.
// Passed to kernels by value, so it stays a small flat struct.
template <int N>
struct StridedLayout {
  int rank = 0;
  bool index_fits_32bit = true;  // element indices below 2^32: cheaper division
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims][N] = {};  // element strides, [dim][operand]

  // Element offsets of each operand for the row-major element index `linear`.
  __device__ __forceinline__ void offsets(int64_t linear, int64_t (&result)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) result[k] = 0;
#pragma unroll
    for (int dim = 0; dim < kMaxDims; ++dim) {
      // Dims past `rank` are skipped, not broken out of: clang unrolls no loop with a break.
      if (dim < rank) {
        int64_t index;
        if (index_fits_32bit) {
          const auto rest = static_cast<uint32_t>(linear);
          const auto size = static_cast<uint32_t>(sizes[dim]);
          index = rest % size;
          linear = rest / size;
        } else {
          index = linear % sizes[dim];
          linear /= sizes[dim];
        }
#pragma unroll
        for (int k = 0; k < N; ++k) result[k] += index * strides[dim][k];
      }
    }
  }

  // One run of stride 1 in every operand (or a single element).
  bool contiguous() const {
    if (rank != 1) return false;
    if (sizes[0] == 1) return true;
    for (int k = 0; k < N; ++k)
      if (strides[0][k] != 1) return false;
    return true;
  }
};

template <int N>
StridedLayout<N> make_strided_layout(const char* op, const Shape& sizes,
                                     const std::array<const Shape*, N>& strides) {
  StridedLayout<N> layout;
  int64_t numel = 1;
  for (size_t dim = sizes.size(); dim-- > 0;) {
    numel *= sizes[dim];
    if (sizes[dim] == 1) continue;
    if (layout.rank > 0) {
      // Merge into the inner dim when every operand steps over it exactly.
      const int inner = layout.rank - 1;
      bool mergeable = true;
      for (int k = 0; k < N; ++k)
        mergeable &= (*strides[k])[dim] == layout.strides[inner][k] * layout.sizes[inner];
      if (mergeable) {
        layout.sizes[inner] *= sizes[dim];
        continue;
      }
    }
    TESSERA_REQUIRE(layout.rank < kMaxDims,
                    "{}: shape {} needs more than {} dims after merging contiguous ones; the GPU "
                    "kernels index at most {} (make an input contiguous first)",
                    op, shape_str(sizes), kMaxDims, kMaxDims);
    layout.sizes[layout.rank] = sizes[dim];
    for (int k = 0; k < N; ++k) layout.strides[layout.rank][k] = (*strides[k])[dim];
    ++layout.rank;
  }
  if (layout.rank == 0) {  // a single element
    layout.rank = 1;
    layout.sizes[0] = 1;
  }
  layout.index_fits_32bit = numel <= static_cast<int64_t>(UINT32_MAX);
  return layout;
}

template <int E, typename Out, typename Functor, typename... In>
__device__ __forceinline__ void apply_packs(const Functor& fn, Out* out,
                                            const Pack<In, E>&... inputs) {
  Pack<Out, E> result;
#pragma unroll
  for (int j = 0; j < E; ++j) result.values[j] = fn(inputs.values[j]...);
  store_pack<E>(out, result);
}

// Packs of E elements, grid-stride; the thread that meets the end covers the partial pack.
template <int E, typename Out, typename Functor, typename... In>
__global__ void __launch_bounds__(kElementwiseThreads)
    contiguous_map_kernel(int64_t numel, Functor fn, Out* out, const In*... inputs) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x * E;
  for (int64_t begin = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * E;
       begin < numel; begin += step) {
    if (begin + E <= numel) {
      apply_packs<E>(fn, out + begin, load_pack<E>(inputs + begin)...);
    } else {
      for (int64_t i = begin; i < numel; ++i) out[i] = fn(inputs[i]...);
    }
  }
}

template <typename Out, typename Functor, int N, size_t... I, typename... In>
__device__ __forceinline__ void apply_at(const Functor& fn, Out* out, const int64_t (&offsets)[N],
                                         std::index_sequence<I...>, const In*... inputs) {
  out[offsets[0]] = fn(inputs[offsets[I + 1]]...);
}

template <typename Out, typename Functor, typename... In>
__global__ void __launch_bounds__(kElementwiseThreads)
    strided_map_kernel(int64_t numel, StridedLayout<1 + sizeof...(In)> layout, Functor fn, Out* out,
                       const In*... inputs) {
  constexpr int N = 1 + sizeof...(In);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += step) {
    int64_t offsets[N];
    layout.offsets(i, offsets);
    apply_at(fn, out, offsets, std::index_sequence_for<In...>{}, inputs...);
  }
}

// An input read as device element type T.
template <typename T>
struct Input {
  const Tensor& tensor;
};

// Launches out[i] = fn(inputs[i]...) on the current stream of out's device. The inputs must have
// out's sizes (broadcast inputs arrive expanded, with stride 0). The output may alias an input
// element for element (in-place updates): each element is read before it is written by the same
// thread.
template <typename Out, typename Functor, typename... In>
void launch_map(const char* op, const Tensor& out, const Functor& fn, Input<In>... inputs) {
  constexpr int N = 1 + sizeof...(In);
  for (const Tensor* input : {&inputs.tensor...}) {
    TESSERA_CHECK(input->sizes() == out.sizes(), "{}: input {} vs output {}", op,
                  shape_str(input->sizes()), shape_str(out.sizes()));
  }
  const int64_t numel = out.numel();
  if (numel == 0) return;
  LaunchScope scope(out.device());
  const StridedLayout<N> layout =
      make_strided_layout<N>(op, out.sizes(), {&out.strides(), &inputs.tensor.strides()...});
  Out* out_data = static_cast<Out*>(out.data_ptr());
  constexpr int E = kPackElements<Out>;
  const bool aligned =
      pack_aligned<Out, E>(out_data) && (pack_aligned<In, E>(inputs.tensor.data_ptr()) && ...);
  if (layout.contiguous() && aligned) {
    const unsigned int blocks = grid_size(ceil_div(numel, E), kElementwiseThreads);
    contiguous_map_kernel<E, Out, Functor, In...>
        <<<blocks, kElementwiseThreads, 0, scope.stream()>>>(
            numel, fn, out_data, static_cast<const In*>(inputs.tensor.data_ptr())...);
  } else {
    const unsigned int blocks = grid_size(numel, kElementwiseThreads);
    strided_map_kernel<Out, Functor, In...><<<blocks, kElementwiseThreads, 0, scope.stream()>>>(
        numel, layout, fn, out_data, static_cast<const In*>(inputs.tensor.data_ptr())...);
  }
  GPU_CHECK_LAUNCH(op);
}

}  // namespace tessera::gpu
