// GPU kernels of the last-dim reductions (sum, mean, max, argmax) and softmax. The input arrives
// contiguous, viewed as [rows, cols]. Short rows get one warp each (several rows per block), long
// rows a whole block; each thread accumulates a strided share of its row in f32 (16-byte loads
// when the row is aligned), then the row's threads combine their partials with warp shuffles and,
// across warps, shared memory. keepdim only changes the output's shape, never the kernel.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/sampling.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

// ---- Reducers: Acc, identity(), add(acc, value, index) for one element (argmax's is its
// RunningState below), combine(a, b) for two partials, shuffle_xor (for device_utils.cuh's
// reductions), and finish() for the output.

struct SumReducer {
  static constexpr const char* kName = "sum";
  static constexpr bool kIndexOutput = false;
  using Acc = float;
  __device__ static Acc identity() { return 0.0f; }
  __device__ static Acc add(Acc acc, float value, int64_t) { return acc + value; }
  __device__ static Acc combine(Acc a, Acc b) { return a + b; }
  __device__ static Acc shuffle_xor(Acc a, int mask) { return GPU_SHFL_XOR(a, mask); }
  template <typename Out>
  __device__ static Out finish(Acc acc, int64_t) {
    return from_compute<Out>(acc);
  }
};

struct MeanReducer : SumReducer {
  static constexpr const char* kName = "mean";
  template <typename Out>
  __device__ static Out finish(Acc acc, int64_t cols) {
    return from_compute<Out>(acc / static_cast<float>(cols));
  }
};

// NaN wins, as in torch.max.
struct MaxReducer {
  static constexpr const char* kName = "max";
  static constexpr bool kIndexOutput = false;
  using Acc = float;
  __device__ static Acc identity() { return -INFINITY; }
  __device__ static Acc combine(Acc a, Acc b) { return (b > a || b != b) ? b : a; }
  __device__ static Acc add(Acc acc, float value, int64_t) { return combine(acc, value); }
  __device__ static Acc shuffle_xor(Acc a, int mask) { return GPU_SHFL_XOR(a, mask); }
  template <typename Out>
  __device__ static Out finish(Acc acc, int64_t) {
    return from_compute<Out>(acc);
  }
};

// The first index of the maximum; a NaN counts as the maximum (torch.argmax does the same).
struct ArgmaxReducer {
  static constexpr const char* kName = "argmax";
  static constexpr bool kIndexOutput = true;
  struct Acc {
    float value;
    int64_t index;
  };
  __device__ static Acc identity() { return Acc{-INFINITY, INT64_MAX}; }
  __device__ static Acc combine(Acc a, Acc b) {
    const bool a_nan = a.value != a.value;
    const bool b_nan = b.value != b.value;
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
    return a.index <= b.index ? a : b;
  }
  __device__ static Acc shuffle_xor(Acc a, int mask) {
    return Acc{GPU_SHFL_XOR(a.value, mask), GPU_SHFL_XOR(a.index, mask)};
  }
  template <typename Out>
  __device__ static Out finish(Acc acc, int64_t) {
    return acc.index;
  }
};

// Online softmax statistics: the running maximum and the sum of exp(x - max), rescaled whenever
// the maximum grows, so the row is read once for both. -inf entries (masks) contribute 0; a row of
// only -inf ends as {-inf, 0} and its softmax is NaN, as in PyTorch.
struct SoftmaxReducer {
  struct Acc {
    float max;
    float sum;
  };
  __device__ static Acc identity() { return Acc{-INFINITY, 0.0f}; }
  __device__ static Acc add(Acc acc, float value, int64_t) {
    if (value > acc.max) return Acc{value, acc.sum * expf(acc.max - value) + 1.0f};
    return Acc{acc.max, acc.sum + (value == -INFINITY ? 0.0f : expf(value - acc.max))};
  }
  __device__ static Acc combine(Acc a, Acc b) {
    if (a.max == -INFINITY) return b;
    if (b.max == -INFINITY) return a;
    const float max = fmaxf(a.max, b.max);
    return Acc{max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
  }
  __device__ static Acc shuffle_xor(Acc a, int mask) {
    return Acc{GPU_SHFL_XOR(a.max, mask), GPU_SHFL_XOR(a.sum, mask)};
  }
};

// ---- Row traversal.

// What one thread keeps while it walks its share of a row in increasing index order: by default
// the reducer's Acc, updated by add().
template <typename Reducer>
struct RunningState {
  using Type = typename Reducer::Acc;
  __device__ static Type start() { return Reducer::identity(); }
  __device__ static Type add(Type state, float value, int64_t index) {
    return Reducer::add(state, value, index);
  }
  __device__ static typename Reducer::Acc finish(Type state) { return state; }
};

// argmax's: the best value as an integer key that orders as the floats do (a NaN above +inf,
// -0 as +0), so each element costs one integer compare: elements arrive in increasing index
// order, and a later one wins only when strictly greater, which keeps the first maximum and the
// first NaN. ArgmaxReducer::add, with its NaN and index tests on every element, made a block
// over a vocabulary row compute-bound (docs/performance.md "Argmax over a vocabulary row").
template <>
struct RunningState<ArgmaxReducer> {
  struct Type {
    int32_t key;
    int64_t index;
  };
  __device__ static Type start() { return Type{INT32_MIN, INT64_MAX}; }
  // A float's bits are its magnitude and sign: a negative one keys as minus its magnitude, so
  // -0 and +0 both key as 0.
  __device__ static int32_t key_of(float value) {
    const int32_t bits = __float_as_int(value);
    return value != value ? INT32_MAX : bits >= 0 ? bits : -(bits & 0x7fffffff);
  }
  __device__ static Type add(Type state, float value, int64_t index) {
    const int32_t key = key_of(value);
    return key > state.key ? Type{key, index} : state;
  }
  __device__ static ArgmaxReducer::Acc finish(Type state) {
    if (state.index == INT64_MAX) return ArgmaxReducer::identity();  // no element
    const int32_t bits = state.key >= 0 ? state.key : -state.key | INT32_MIN;
    return ArgmaxReducer::Acc{state.key == INT32_MAX ? NAN : __int_as_float(bits), state.index};
  }
};

// This thread's partial over its share of the row: elements lane, lane + kThreadsPerRow, ...
// (in packs of E when the row start is 16-byte aligned, then the unaligned tail).
// `first`: the column `row` starts at, which argmax's indices count from.
//
// Packs are loaded kPacksInFlight at a time before any is used, so that a long row's loads overlap
// instead of each waiting out the memory's latency: one block over a 128k vocabulary row (the
// argmax op inside a capture, which runs unsplit) otherwise reads it at one load per thread per
// round trip. The packs are still added in the same order, so sums round as before.
template <typename Reducer, int kThreadsPerRow, typename T>
__device__ __forceinline__ typename Reducer::Acc accumulate_row(const T* row, int64_t cols,
                                                                int lane, int64_t first = 0) {
  constexpr int E = kPackElements<T>;
  constexpr int kPacksInFlight = 4;
  using State = RunningState<Reducer>;
  typename State::Type acc = State::start();
  auto add_pack = [&](const Pack<T, E>& values, int64_t pack) {
#pragma unroll
    for (int j = 0; j < E; ++j)
      acc = State::add(acc, to_float(values.values[j]), first + pack * E + j);
  };
  int64_t tail_begin = 0;
  if (reinterpret_cast<uintptr_t>(row) % alignof(Pack<T, E>) == 0) {
    const int64_t packs = cols / E;
    int64_t pack = lane;
    for (; pack + (kPacksInFlight - 1) * kThreadsPerRow < packs;
         pack += kPacksInFlight * kThreadsPerRow) {
      Pack<T, E> values[kPacksInFlight];
#pragma unroll
      for (int u = 0; u < kPacksInFlight; ++u)
        values[u] = load_pack<E>(row + (pack + u * kThreadsPerRow) * E);
#pragma unroll
      for (int u = 0; u < kPacksInFlight; ++u) add_pack(values[u], pack + u * kThreadsPerRow);
    }
    for (; pack < packs; pack += kThreadsPerRow) add_pack(load_pack<E>(row + pack * E), pack);
    tail_begin = packs * E;
  }
  for (int64_t i = tail_begin + lane; i < cols; i += kThreadsPerRow) {
    acc = State::add(acc, to_float(row[i]), first + i);
  }
  return State::finish(acc);
}

// The whole row's result, in every thread of the row.
template <typename Reducer, int kThreadsPerRow, int kBlockThreads>
__device__ __forceinline__ typename Reducer::Acc reduce_row(typename Reducer::Acc partial,
                                                            typename Reducer::Acc* scratch) {
  if constexpr (kThreadsPerRow == kBlockThreads) {
    return block_reduce<Reducer, kBlockThreads>(partial, scratch);
  } else {
    static_assert(kThreadsPerRow <= GPU_WARP_SIZE, "a row is a whole block or within one warp");
    return group_reduce<Reducer, kThreadsPerRow>(partial);
  }
}

// Rows are assigned grid-stride; in block-per-row mode the loop condition is uniform across the
// block, so the __syncthreads() inside block_reduce is reached by every thread.
template <typename T, typename Out, typename Reducer, int kThreadsPerRow, int kBlockThreads>
__global__ void __launch_bounds__(kBlockThreads)
    row_reduce_kernel(int64_t rows, int64_t cols, const T* x, Out* out) {
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  __shared__ typename Reducer::Acc scratch[kBlockThreads / GPU_WARP_SIZE];
  const int lane = threadIdx.x % kThreadsPerRow;
  for (int64_t first_row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock; first_row < rows;
       first_row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t row = first_row + threadIdx.x / kThreadsPerRow;
    if (row >= rows) continue;  // only in warp-per-row mode, where it is uniform per warp
    const auto partial = accumulate_row<Reducer, kThreadsPerRow>(x + row * cols, cols, lane);
    const auto total = reduce_row<Reducer, kThreadsPerRow, kBlockThreads>(partial, scratch);
    if (lane == 0) out[row] = Reducer::template finish<Out>(total, cols);
  }
}

// ---- Few long rows (the greedy pick's argmax over a vocabulary at small batches): a block per row
// reads a 128k-entry row at one SM's pace (docs/performance.md "Argmax over a vocabulary row").
// Instead each row is split into chunks, a block each, and a warp per row combines the chunks'
// partial results. Only for max and argmax, whose result does not depend on the order of the
// combination (a split sum would round differently from the unsplit one).

constexpr int kChunkThreads = 256;

template <typename T, typename Reducer>
__global__ void __launch_bounds__(kChunkThreads)
    chunk_reduce_kernel(int64_t cols, int64_t chunk_cols, const T* x,
                        typename Reducer::Acc* partials) {
  __shared__ typename Reducer::Acc scratch[kChunkThreads / GPU_WARP_SIZE];
  const int64_t row = blockIdx.y;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * chunk_cols;
  const int64_t count = min(chunk_cols, cols - first);
  const auto partial = accumulate_row<Reducer, kChunkThreads>(x + row * cols + first, count,
                                                              static_cast<int>(threadIdx.x), first);
  const auto total = block_reduce<Reducer, kChunkThreads>(partial, scratch);
  if (threadIdx.x == 0) partials[row * gridDim.x + blockIdx.x] = total;
}

template <typename Out, typename Reducer>
__global__ void __launch_bounds__(kChunkThreads)
    combine_chunks_kernel(int64_t rows, int64_t cols, int chunks,
                          const typename Reducer::Acc* partials, Out* out) {
  constexpr int kRowsPerBlock = kChunkThreads / GPU_WARP_SIZE;
  const int64_t row =
      static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / GPU_WARP_SIZE;
  if (row >= rows) return;  // uniform per warp
  const int lane = static_cast<int>(threadIdx.x % GPU_WARP_SIZE);
  typename Reducer::Acc acc = Reducer::identity();
  for (int chunk = lane; chunk < chunks; chunk += GPU_WARP_SIZE)
    acc = Reducer::combine(acc, partials[row * chunks + chunk]);
  const auto total = group_reduce<Reducer, GPU_WARP_SIZE>(acc);
  if (lane == 0) out[row] = Reducer::template finish<Out>(total, cols);
}

template <typename T, int kThreadsPerRow, int kBlockThreads>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_kernel(int64_t rows, int64_t cols, const T* x, T* out) {
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  constexpr int E = kPackElements<T>;
  __shared__ SoftmaxReducer::Acc scratch[kBlockThreads / GPU_WARP_SIZE];
  const int lane = threadIdx.x % kThreadsPerRow;
  for (int64_t first_row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock; first_row < rows;
       first_row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t row = first_row + threadIdx.x / kThreadsPerRow;
    if (row >= rows) continue;
    const T* in_row = x + row * cols;
    T* out_row = out + row * cols;
    const auto partial = accumulate_row<SoftmaxReducer, kThreadsPerRow>(in_row, cols, lane);
    const auto stats = reduce_row<SoftmaxReducer, kThreadsPerRow, kBlockThreads>(partial, scratch);
    const float scale = 1.0f / stats.sum;  // as the CPU kernel: exp(x - max) * (1 / sum)
    int64_t tail_begin = 0;
    if (reinterpret_cast<uintptr_t>(in_row) % alignof(Pack<T, E>) == 0 &&
        reinterpret_cast<uintptr_t>(out_row) % alignof(Pack<T, E>) == 0) {
      const int64_t packs = cols / E;
      for (int64_t pack = lane; pack < packs; pack += kThreadsPerRow) {
        const Pack<T, E> values = load_pack<E>(in_row + pack * E);
        Pack<T, E> result;
#pragma unroll
        for (int j = 0; j < E; ++j) {
          result.values[j] = from_compute<T>(expf(to_float(values.values[j]) - stats.max) * scale);
        }
        store_pack<E>(out_row + pack * E, result);
      }
      tail_begin = packs * E;
    }
    for (int64_t i = tail_begin + lane; i < cols; i += kThreadsPerRow) {
      out_row[i] = from_compute<T>(expf(to_float(in_row[i]) - stats.max) * scale);
    }
  }
}

// ---- Launch: a warp per row up to 1024 columns, a 256-thread block per row up to 16384, a
// 1024-thread block beyond (vocabulary-sized rows, where few rows must still fill the GPU).

constexpr int64_t kWarpRowLimit = 1024;
constexpr int64_t kSmallBlockRowLimit = 16384;

// Columns per chunk at least (a multiple of every pack, so chunks keep a row's alignment), and the
// blocks per SM the chunks aim for.
constexpr int64_t kMinChunkColumns = 4096;
constexpr int64_t kChunkBlocksPerSm = 2;

// The chunks per row for a split reduction, or 1 where rows are short or a block per row already
// gives at least every other SM a row: there the combine launch costs more than the split wins
// (docs/performance.md "Argmax over a vocabulary row").
int64_t row_chunks(int64_t rows, int64_t cols, Device device) {
  const int64_t sms = device_limits(device.index).sm_count;
  if (2 * rows >= sms || cols < 2 * kMinChunkColumns) return 1;
  return std::min(ceil_div(cols, kMinChunkColumns), ceil_div(kChunkBlocksPerSm * sms, rows));
}

// Columns per chunk when a row of `cols` is split into at most `chunks` chunks (the chunks that
// gives: ceil_div(cols, split_chunk_cols(...))).
int64_t split_chunk_cols(int64_t cols, int64_t chunks) {
  return ceil_div(ceil_div(cols, chunks), int64_t{64}) * 64;
}

// `partial`: scratch for rows * ceil_div(cols, split_chunk_cols(cols, chunks)) partial results.
template <typename Reducer, typename T, typename Out>
void launch_split_reduce(int64_t rows, int64_t cols, int64_t chunks, const T* x, Out* out,
                         typename Reducer::Acc* partial, gpuStream_t stream) {
  const int64_t chunk_cols = split_chunk_cols(cols, chunks);
  chunks = ceil_div(cols, chunk_cols);
  chunk_reduce_kernel<T, Reducer>
      <<<dim3(static_cast<unsigned int>(chunks), static_cast<unsigned int>(rows)), kChunkThreads, 0,
         stream>>>(cols, chunk_cols, x, partial);
  GPU_CHECK_LAUNCH(Reducer::kName);
  constexpr int kRowsPerBlock = kChunkThreads / GPU_WARP_SIZE;
  combine_chunks_kernel<Out, Reducer><<<grid_size(rows, kRowsPerBlock), kChunkThreads, 0, stream>>>(
      rows, cols, static_cast<int>(chunks), partial, out);
  GPU_CHECK_LAUNCH(Reducer::kName);
}

template <typename Reducer, typename T, typename Out>
void launch_row_reduce(int64_t rows, int64_t cols, const T* x, Out* out, gpuStream_t stream) {
  if (cols <= kWarpRowLimit) {
    constexpr int kRowsPerBlock = 256 / GPU_WARP_SIZE;
    row_reduce_kernel<T, Out, Reducer, GPU_WARP_SIZE, 256>
        <<<grid_size(rows, kRowsPerBlock), 256, 0, stream>>>(rows, cols, x, out);
  } else if (cols <= kSmallBlockRowLimit) {
    row_reduce_kernel<T, Out, Reducer, 256, 256>
        <<<grid_size(rows, 1), 256, 0, stream>>>(rows, cols, x, out);
  } else {
    row_reduce_kernel<T, Out, Reducer, 1024, 1024>
        <<<grid_size(rows, 1), 1024, 0, stream>>>(rows, cols, x, out);
  }
  GPU_CHECK_LAUNCH(Reducer::kName);
}

template <typename T>
void launch_softmax(int64_t rows, int64_t cols, const T* x, T* out, gpuStream_t stream) {
  if (cols <= kWarpRowLimit) {
    constexpr int kRowsPerBlock = 256 / GPU_WARP_SIZE;
    softmax_kernel<T, GPU_WARP_SIZE, 256>
        <<<grid_size(rows, kRowsPerBlock), 256, 0, stream>>>(rows, cols, x, out);
  } else if (cols <= kSmallBlockRowLimit) {
    softmax_kernel<T, 256, 256><<<grid_size(rows, 1), 256, 0, stream>>>(rows, cols, x, out);
  } else {
    softmax_kernel<T, 1024, 1024><<<grid_size(rows, 1), 1024, 0, stream>>>(rows, cols, x, out);
  }
  GPU_CHECK_LAUNCH("softmax");
}

// [rows, cols] of a contiguous input; a 0-d input is one row of one element.
struct RowShape {
  int64_t rows = 0;
  int64_t cols = 0;
};

RowShape row_shape(const char* op, const Tensor& x) {
  TESSERA_CHECK(x.is_contiguous(), "{}: the GPU kernel needs a contiguous input", op);
  if (x.dim() == 0) return RowShape{1, 1};
  RowShape shape;
  shape.cols = x.size(-1);
  shape.rows = 1;
  for (int64_t dim = 0; dim + 1 < x.dim(); ++dim) shape.rows *= x.size(dim);
  return shape;
}

template <typename Reducer>
void reduce_kernel(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const RowShape shape = row_shape(Reducer::kName, x);
  if constexpr (std::is_same_v<Reducer, MaxReducer> || std::is_same_v<Reducer, ArgmaxReducer>) {
    TESSERA_REQUIRE(shape.cols > 0 || shape.rows == 0,
                    "{}: cannot reduce an empty last dim (input {}); it has no maximum",
                    Reducer::kName, shape_str(x.sizes()));
  }
  const DType out_dtype = Reducer::kIndexOutput ? DType::i64 : x.dtype();
  TESSERA_REQUIRE(out.dtype() == out_dtype, "{}: output has dtype {} but {} was expected",
                  Reducer::kName, dtype_name(out.dtype()), dtype_name(out_dtype));
  TESSERA_CHECK(out.numel() == shape.rows && out.is_contiguous(), "{}: output {} for {} rows",
                Reducer::kName, shape_str(out.sizes()), shape.rows);
  if (shape.rows == 0) return;
  LaunchScope scope(x.device());
  int64_t chunks = 1;
  if constexpr (std::is_same_v<Reducer, MaxReducer> || std::is_same_v<Reducer, ArgmaxReducer>) {
    if (!stream_capturing(scope.stream())) chunks = row_chunks(shape.rows, shape.cols, x.device());
  }
  visit_device_float_dtype(Reducer::kName, x.dtype(), [&]<typename T>() {
    using Out = std::conditional_t<Reducer::kIndexOutput, int64_t, T>;
    const T* in = static_cast<const T*>(x.data_ptr());
    Out* result = static_cast<Out*>(out.data_ptr());
    if (chunks > 1) {
      // Stream-ordered scratch from the caching allocator (never in a capture: greedy_pick).
      using Acc = typename Reducer::Acc;
      const int64_t partials =
          shape.rows * ceil_div(shape.cols, split_chunk_cols(shape.cols, chunks));
      const Tensor scratch =
          Tensor::empty({ceil_div(partials * static_cast<int64_t>(sizeof(Acc)), int64_t{8})},
                        DType::i64, x.device());
      launch_split_reduce<Reducer>(shape.rows, shape.cols, chunks, in, result,
                                   static_cast<Acc*>(scratch.data_ptr()), scope.stream());
    } else {
      launch_row_reduce<Reducer>(shape.rows, shape.cols, in, result, scope.stream());
    }
  });
}

// kernels/sampling.h: argmax with the split's scratch from the caller, so a capture holds it.
void greedy_pick_entry(const KernelArgs& args) {
  using Acc = ArgmaxReducer::Acc;
  const Tensor& x = args.inputs[0];
  const Tensor& ids = args.outputs[0];
  const Tensor& workspace = args.outputs[1];
  TESSERA_CHECK(x.dim() == 2 && x.is_contiguous() && x.size(1) > 0, "greedy_pick: logits {}",
                x.str());
  const int64_t rows = x.size(0), cols = x.size(1);
  TESSERA_CHECK(ids.dtype() == DType::i64 && ids.is_contiguous() && ids.numel() == rows,
                "greedy_pick: ids {} for {} rows", ids.str(), rows);
  TESSERA_CHECK(workspace.dtype() == DType::i64 && workspace.is_contiguous() &&
                    workspace.numel() >= kGreedyPickWorkspaceWords * rows,
                "greedy_pick: workspace {} for {} rows", workspace.str(), rows);
  static_assert(sizeof(Acc) % sizeof(int64_t) == 0);
  constexpr int64_t kChunksPerRow =
      kGreedyPickWorkspaceWords / static_cast<int64_t>(sizeof(Acc) / sizeof(int64_t));
  if (rows == 0) return;
  LaunchScope scope(x.device());
  const int64_t chunks = std::min(row_chunks(rows, cols, x.device()), kChunksPerRow);
  visit_device_float_dtype("greedy_pick", x.dtype(), [&]<typename T>() {
    const T* in = static_cast<const T*>(x.data_ptr());
    auto* result = static_cast<int64_t*>(ids.data_ptr());
    if (chunks > 1)
      launch_split_reduce<ArgmaxReducer>(rows, cols, chunks, in, result,
                                         static_cast<Acc*>(workspace.data_ptr()), scope.stream());
    else
      launch_row_reduce<ArgmaxReducer>(rows, cols, in, result, scope.stream());
  });
}

void softmax_entry(const KernelArgs& args) {
  const Tensor& x = args.inputs[0];
  const Tensor& out = args.outputs[0];
  const RowShape shape = row_shape("softmax", x);
  TESSERA_REQUIRE(out.dtype() == x.dtype(), "softmax: output has dtype {} but {} was expected",
                  dtype_name(out.dtype()), dtype_name(x.dtype()));
  TESSERA_CHECK(out.sizes() == x.sizes() && out.is_contiguous(), "softmax: output {} for input {}",
                shape_str(out.sizes()), shape_str(x.sizes()));
  if (x.numel() == 0) return;
  LaunchScope scope(x.device());
  visit_device_float_dtype("softmax", x.dtype(), [&]<typename T>() {
    launch_softmax<T>(shape.rows, shape.cols, static_cast<const T*>(x.data_ptr()),
                      static_cast<T*>(out.data_ptr()), scope.stream());
  });
}

TESSERA_REGISTER_KERNEL("sum", kGpuDeviceType, reduce_kernel<SumReducer>);
TESSERA_REGISTER_KERNEL("mean", kGpuDeviceType, reduce_kernel<MeanReducer>);
TESSERA_REGISTER_KERNEL("max", kGpuDeviceType, reduce_kernel<MaxReducer>);
TESSERA_REGISTER_KERNEL("argmax", kGpuDeviceType, reduce_kernel<ArgmaxReducer>);
TESSERA_REGISTER_KERNEL("greedy_pick", kGpuDeviceType, greedy_pick_entry);
TESSERA_REGISTER_KERNEL("softmax", kGpuDeviceType, softmax_entry);

}  // namespace
}  // namespace tessera::gpu
