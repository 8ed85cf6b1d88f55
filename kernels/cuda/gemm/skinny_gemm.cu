// The skinny GEMM kernels (skinny_gemm.h): out[m, n] = x[m, k] @ weight[n, k]^T (+ bias[n]).
//
// Grid: x = groups of kTokens rows of x (adjacent blocks share a weight tile, so a second group
// finds it in L2), y = tiles of weight rows. A simt block is `splits` warps over the same weight
// rows, each taking every splits-th step along k; the steps a warp takes are unrolled so that
// several 16-byte weight loads per lane are in flight before the first is used (an mma block
// also spreads its warps over several weight tiles, below). Weight loads bypass L1
// (each weight byte is used by one warp once); x is read through L1, where the warps of an SM
// share it. Rows of the weight and of x past n and m are clamped to the last row (read, never
// stored); lanes past k load zeros.
//
// mma mapping: a lane (group g = lane / 4, quad q = lane % 4) loads 8 consecutive k of weight rows
// g and g + 8 and of x row g of each tile. The order of k inside a dot product does not matter as
// long as A and B agree, so those 8 values feed two mma k-steps, each taking logical k
// {2q, 2q + 1, 2q + 8, 2q + 9} from the lane's physical k {8q .. 8q + 3} and {8q + 4 .. 8q + 7}:
// no shared memory, no ldmatrix. A warp step covers 64 k (two 32-k halves, 128 contiguous bytes
// of each of its 16 weight rows).
//
// Both read x through an input policy: PlainInput loads it; GatedInput computes it from the gate
// and up halves of a gated row (act(gate) * up in f32, rounded once, as silu_and_mul does), so
// the gated MLP's activation needs no launch of its own, and the warps of the first weight tile
// store what they computed (each element once) for whoever reads the activation later.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm/l2_prefetch.cuh"
#include "kernels/cuda/gemm/skinny_gemm.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/linear_path.h"
#include "kernels/pointwise_table.h"
#include "runtime/check.h"

namespace tessera::gpu {
namespace {

constexpr int kWarp = GPU_WARP_SIZE;
constexpr int kMaxSplits = 16;
// The warps per SM the split-k choice aims for: enough 16-byte loads in flight to cover memory
// latency at full bandwidth (Little's law, worked out in docs/performance.md "Skinny GEMM
// layout").
constexpr int kTargetWarpsPerSm = 32;

struct SkinnyArgs {
  const void* x;
  const void* weight;
  const void* bias;
  void* out;
  int m;
  int n;
  int64_t k;
  L2Prefetch prefetch;  // the next GEMM's weight, asked for by the last blocks as they end
  int prefetch_blocks;  // how many of the last blocks ask for it
  int row_warps;        // mma: the warps of a block along weight rows (1 for simt)
};

// ---- 16-byte loads and their values as f32.

// Weights are read once: keep them out of L1.
__device__ __forceinline__ uint4 load_weight_pack(const void* address) {
#if defined(TESSERA_GPU_HIP)
  return *static_cast<const uint4*>(address);
#else
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(address));
  return v;
#endif
}

// x is read by every warp of the block and by the blocks beside it: through L1 (a plain load
// caches there). Not __ldg: the compiler may hoist such an invariant load above
// wait_for_prior_grids(), and x is what the kernel before this one writes.
__device__ __forceinline__ uint4 load_input_pack(const void* address) {
  return *static_cast<const uint4*>(address);
}

template <typename T>
inline constexpr int kPack = static_cast<int>(16 / sizeof(T));

template <typename T>
__device__ __forceinline__ void unpack(const uint4& bits, float (&values)[kPack<T>]) {
  const uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, float>) {
      values[i] = __uint_as_float(words[i]);
    } else if constexpr (std::is_same_v<T, gpu_bfloat16>) {
      // A bf16 is the high half of an f32.
      values[2 * i] = __uint_as_float(words[i] << 16);
      values[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    } else {
      gpu_half halves[2];
      memcpy(halves, &words[i], sizeof(halves));
      values[2 * i] = static_cast<float>(halves[0]);
      values[2 * i + 1] = static_cast<float>(halves[1]);
    }
  }
}

// The 16-byte pack of T holding `values` rounded to T.
template <typename T>
__device__ __forceinline__ uint4 pack_values(const float (&values)[kPack<T>]) {
  T rounded[kPack<T>];
#pragma unroll
  for (int i = 0; i < kPack<T>; ++i) rounded[i] = from_compute<T>(values[i]);
  uint4 bits;
  memcpy(&bits, rounded, sizeof(bits));
  return bits;
}

// ---- Input policies: the pack of x row `token` (clamped to m - 1) at `column` (a multiple of
// the pack); `store` says that this block stores what it computed (gated inputs only).

template <typename T>
struct PlainInput {
  const T* x;
  int64_t k;
  __device__ __forceinline__ uint4 pack(int token, int64_t column, bool /*store*/) const {
    return load_input_pack(x + static_cast<int64_t>(token) * k + column);
  }
};

template <typename T, typename Activation>
struct GatedInput {
  const T* gated;  // [m, 2k]: gate | up
  T* activated;    // [m, k]
  int64_t k;
  Activation activation;
  __device__ __forceinline__ uint4 pack(int token, int64_t column, bool store) const {
    const T* row = gated + static_cast<int64_t>(token) * 2 * k + column;
    float gate[kPack<T>], up[kPack<T>];
    unpack<T>(load_input_pack(row), gate);
    unpack<T>(load_input_pack(row + k), up);
#pragma unroll
    for (int i = 0; i < kPack<T>; ++i) gate[i] = activation(gate[i]) * up[i];
    const uint4 bits = pack_values<T>(gate);
    if (store)
      *reinterpret_cast<uint4*>(activated + static_cast<int64_t>(token) * k + column) = bits;
    return bits;
  }
};

// Adds the bias, rounds once and stores, when (row, token) is inside the output.
template <typename T>
__device__ __forceinline__ void store_result(const SkinnyArgs& args, int row, int token,
                                             float value) {
  if (row >= args.n || token >= args.m) return;
  if (args.bias != nullptr) value += to_compute(static_cast<const T*>(args.bias)[row]);
  static_cast<T*>(args.out)[static_cast<int64_t>(token) * args.n + row] = from_compute<T>(value);
}

// The block's share of the next GEMM's weight (SkinnyArgs::prefetch), asked for by each warp
// once it has loaded its last weights. Only the last `prefetch_blocks` blocks (the last
// sm_count, scheduled last) take part: blocks scheduled earlier would pull it in while later
// ones still stream this weight, which measured slower (docs/perf/decode_log.md).
__device__ __forceinline__ void prefetch_next_weight(const SkinnyArgs& args) {
  const int64_t blocks = static_cast<int64_t>(gridDim.x) * gridDim.y;
  const int64_t part =
      static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x - (blocks - args.prefetch_blocks);
  if (part >= 0)
    prefetch_to_l2(args.prefetch, part, args.prefetch_blocks, static_cast<int>(threadIdx.x),
                   static_cast<int>(blockDim.x));
}

// ---- simt: kRows weight rows x kTokens rows of x per warp, f32 FMAs.

// Steps in flight per warp: about 8 weight loads per lane.
template <typename T, int kRows>
inline constexpr int kSimtUnroll = kRows >= 8   ? 1
                                   : kRows >= 4 ? 2
                                                : 4;
// Many rows per warp (fewer blocks: each x value, and a gated input's activation, is computed by
// fewer of them) take more registers: half the warps per block, at most 4 rows of x.
template <int kRows>
inline constexpr int kSimtMaxSplits = kRows >= 8 ? kMaxSplits / 2 : kMaxSplits;
template <int kRows>
inline constexpr int kSimtMaxTokens = kRows >= 8 ? 4 : 8;

template <typename T, int kRows, int kTokens, typename Input>
__global__ void __launch_bounds__(kSimtMaxSplits<kRows>* kWarp)
    skinny_simt_kernel(SkinnyArgs args, Input input) {
  constexpr int E = kPack<T>;
  constexpr int kUnroll = kSimtUnroll<T, kRows>;
  extern __shared__ float simt_partial[];  // [splits][kRows][kTokens]
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int splits = static_cast<int>(blockDim.x) / kWarp;
  const int row0 = static_cast<int>(blockIdx.y) * kRows;
  const int token0 = static_cast<int>(blockIdx.x) * kTokens;
  const int64_t k = args.k;
  const T* weight_rows[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    weight_rows[r] =
        static_cast<const T*>(args.weight) + static_cast<int64_t>(min(row0 + r, args.n - 1)) * k;
  int tokens[kTokens];
  bool store[kTokens];  // gated inputs: the first weight tile's blocks store the activation
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    tokens[t] = min(token0 + t, args.m - 1);
    store[t] = blockIdx.y == 0 && token0 + t < args.m;
  }

  float acc[kRows][kTokens] = {};
  constexpr int64_t kStep = static_cast<int64_t>(kWarp) * E;  // k per warp-wide load
  const int64_t steps = (k + kStep - 1) / kStep;
  // Launched programmatically, the first weight loads overlap the previous kernel's tail: only x
  // and the output wait for it.
  bool waited = false;
  for (int64_t first = warp; first < steps; first += static_cast<int64_t>(splits) * kUnroll) {
    uint4 weights[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t column = (first + static_cast<int64_t>(u) * splits) * kStep + lane * E;
      const bool inside = column < k;  // k is a multiple of E: a pack is all in or all out
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        weights[u][r] = inside ? load_weight_pack(weight_rows[r] + column) : make_uint4(0, 0, 0, 0);
    }
    if (!waited) {
      wait_for_prior_grids();
      allow_next_grid();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t column = (first + static_cast<int64_t>(u) * splits) * kStep + lane * E;
      if (column >= k) break;
      // Each x value once (a gated input computes it here), then every row against it.
      float x_values[kTokens][E];
#pragma unroll
      for (int t = 0; t < kTokens; ++t)
        unpack<T>(input.pack(tokens[t], column, store[t]), x_values[t]);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float weight_values[E];
        unpack<T>(weights[u][r], weight_values);
#pragma unroll
        for (int t = 0; t < kTokens; ++t)
#pragma unroll
          for (int e = 0; e < E; ++e) acc[r][t] = fmaf(weight_values[e], x_values[t][e], acc[r][t]);
      }
    }
  }

  prefetch_next_weight(args);
  if (!waited) {  // a warp past the last step still stores or shares
    wait_for_prior_grids();
    allow_next_grid();
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = group_reduce<FloatSum, kWarp>(acc[r][t]);
  if (splits == 1) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int t = 0; t < kTokens; ++t)
        if (lane == (r * kTokens + t) % kWarp)
          store_result<T>(args, row0 + r, token0 + t, acc[r][t]);
    return;
  }
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int t = 0; t < kTokens; ++t) simt_partial[(warp * kRows + r) * kTokens + t] = acc[r][t];
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < kRows * kTokens;
       i += static_cast<int>(blockDim.x)) {
    float sum = 0;
    for (int w = 0; w < splits; ++w) sum += simt_partial[w * kRows * kTokens + i];
    store_result<T>(args, row0 + i / kTokens, token0 + i % kTokens, sum);
  }
}

// ---- mma: 16 weight rows x kTiles tiles of 8 rows of x per warp, on tensor cores.
//
// A block is row_warps x splits warps: the warps of one split take row_warps neighbouring 16-row
// weight tiles (so they read the same x, which L1 then serves to all but the first), the splits
// take every splits-th step along k. Each warp keeps a ring of kMmaDepth steps of weight loads in
// flight and refills a slot as soon as it has taken its values, so its loads never drain between
// steps (a 64-k step is 2 KB of weight per warp).

#if !defined(TESSERA_GPU_HIP)

constexpr int kMmaRows = 16;
constexpr int kMmaStep = 64;  // k per warp step: two halves of 32
constexpr int kMmaMaxRowWarps = 8;
static_assert(kMmaMaxRowWarps <= kMaxSplits / 2, "a block's row warps must fit every mma kernel");
// Resident warps per SM the grid aims for (the kernels' registers allow about this many).
constexpr int kMmaTargetWarpsPerSm = 16;
// Steps in flight per warp: fewer x tiles leave registers for more.
template <int kTiles>
inline constexpr int kMmaDepth = kTiles <= 2 ? 3 : 2;
// Eight tiles hold 32 accumulators per lane: half the warps, so that registers need not spill.
template <int kTiles>
inline constexpr int kMmaMaxWarps = kTiles >= 8 ? kMaxSplits / 2 : kMaxSplits;

// One warp step's weight: 16 bytes of rows g and g + 8 for each 32-k half.
struct MmaWeightStep {
  uint4 low[2], high[2];
};

template <typename T, int kTiles, typename Input>
__global__ void __launch_bounds__(kMmaMaxWarps<kTiles> * 32)
    skinny_mma_kernel(SkinnyArgs args, Input input) {
  constexpr int kTokens = 8 * kTiles;
  constexpr int kDepth = kMmaDepth<kTiles>;
  extern __shared__ float mma_partial[];  // [splits][row_warps][kTiles][4][32]
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int row_warps = args.row_warps;
  const int splits = static_cast<int>(blockDim.x) / 32 / row_warps;
  const int row_warp = warp % row_warps, split = warp / row_warps;
  const int group = lane / 4, quad = lane % 4;
  const int block_row0 = static_cast<int>(blockIdx.y) * row_warps * kMmaRows;
  const int row0 = block_row0 + row_warp * kMmaRows;
  const int token0 = static_cast<int>(blockIdx.x) * kTokens;
  const int64_t k = args.k;
  const T* weight = static_cast<const T*>(args.weight);
  const T* low_row = weight + static_cast<int64_t>(min(row0 + group, args.n - 1)) * k + quad * 8;
  const T* high_row =
      weight + static_cast<int64_t>(min(row0 + group + 8, args.n - 1)) * k + quad * 8;
  int tokens[kTiles];
  bool store[kTiles];  // gated inputs: the warps of the first weight tile store the activation
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    tokens[j] = min(token0 + 8 * j + group, args.m - 1);
    store[j] = row0 == 0 && token0 + 8 * j + group < args.m;
  }

  // mma_fits keeps k below 2^30, so columns fit an int.
  const int k32 = static_cast<int>(k);
  const int steps = (k32 + kMmaStep - 1) / kMmaStep;
  // A warp whose tile lies past n (the last block's spare row warps) loads nothing.
  const int my_steps = split < steps && row0 < args.n ? (steps - 1 - split) / splits + 1 : 0;
  const int stride = splits * kMmaStep;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // The next step to load: its lane's first column and weight addresses.
  int load_column = split * kMmaStep + quad * 8;
  const T* load_low = low_row + split * kMmaStep;
  const T* load_high = high_row + split * kMmaStep;
  auto load_next = [&](MmaWeightStep& step) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const bool inside = load_column + half * 32 < k32;
      step.low[half] = inside ? load_weight_pack(load_low + half * 32) : zero;
      step.high[half] = inside ? load_weight_pack(load_high + half * 32) : zero;
    }
    load_column += stride;
    load_low += stride;
    load_high += stride;
  };

  MmaWeightStep ring[kDepth];
#pragma unroll
  for (int u = 0; u < kDepth; ++u)
    if (u < my_steps) load_next(ring[u]);
  // As in the simt kernel: the first weight loads overlap the previous kernel; x waits.
  wait_for_prior_grids();
  allow_next_grid();

  float acc[kTiles][4] = {};
  int column = split * kMmaStep + quad * 8;  // the lane's first column of the step in use
  for (int base = 0; base < my_steps; base += kDepth) {
#pragma unroll
    for (int u = 0; u < kDepth; ++u) {
      if (base + u >= my_steps) break;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const bool inside = column + half * 32 < k32;
        const uint4& a_low = ring[u].low[half];
        const uint4& a_high = ring[u].high[half];
        const uint32_t first_k[4] = {a_low.x, a_high.x, a_low.y, a_high.y};
        const uint32_t second_k[4] = {a_low.z, a_high.z, a_low.w, a_high.w};
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          const uint4 b = inside ? input.pack(tokens[j], column + half * 32, store[j]) : zero;
          mma_16x8x16<T>(acc[j], first_k, b.x, b.y);
          mma_16x8x16<T>(acc[j], second_k, b.z, b.w);
        }
      }
      column += stride;
      // The slot's values are in the accumulators: refill it with the step kDepth ahead.
      if (base + u + kDepth < my_steps) load_next(ring[u]);
    }
  }

  prefetch_next_weight(args);
  // C fragment: c0, c1 = weight row g, x rows 2q, 2q + 1 of the tile; c2, c3 = weight row g + 8.
  if (splits == 1) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        store_result<T>(args, row0 + group + (c >= 2 ? 8 : 0), token0 + 8 * j + 2 * quad + (c & 1),
                        acc[j][c]);
    return;
  }
  constexpr int kValues = kTiles * 4 * 32;  // one warp's accumulators
  const int values = row_warps * kValues;   // one split's
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      mma_partial[split * values + row_warp * kValues + (j * 4 + c) * 32 + lane] = acc[j][c];
  __syncthreads();
  for (int v = static_cast<int>(threadIdx.x); v < values; v += static_cast<int>(blockDim.x)) {
    float sum = 0;
    for (int w = 0; w < splits; ++w) sum += mma_partial[w * values + v];
    const int tile = v / kValues, j = v % kValues / 128, c = v % 128 / 32, owner = v % 32;
    store_result<T>(args, block_row0 + tile * kMmaRows + owner / 4 + (c >= 2 ? 8 : 0),
                    token0 + 8 * j + 2 * (owner % 4) + (c & 1), sum);
  }
}

#endif  // !TESSERA_GPU_HIP

// ---- Host side: fitting, grid and split choice, launch.

int64_t next_power_of_two(int64_t value) {
  int64_t power = 1;
  while (power < value) power *= 2;
  return power;
}

bool aligned_16(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

// What every variant needs: a float dtype, 16-byte rows (k a multiple of the pack) at 16-byte
// aligned addresses, sizes the grid and int indices hold.
bool common_fit(const SkinnyProblem& problem) {
  if (problem.dtype != DType::f32 && problem.dtype != DType::bf16 && problem.dtype != DType::f16)
    return false;
  const int64_t pack = 16 / static_cast<int64_t>(element_size(problem.dtype));
  return problem.m >= 1 && problem.m <= kSkinnyMaxRows && problem.n >= 1 &&
         problem.n <= INT32_MAX / kSkinnyMaxRows && problem.k >= pack && problem.k % pack == 0 &&
         aligned_16(problem.x) && aligned_16(problem.weight) &&
         (problem.activation == SkinnyActivation::none || aligned_16(problem.activated));
}

// Calls launch(input) with the input policy of the problem's activation.
template <typename T, typename Launch>
void with_input(const SkinnyProblem& problem, Launch&& launch) {
  const T* x = static_cast<const T*>(problem.x);
  T* activated = static_cast<T*>(problem.activated);
  switch (problem.activation) {
    case SkinnyActivation::none:
      return launch(PlainInput<T>{x, problem.k});
    case SkinnyActivation::silu:
      return launch(GatedInput<T, PointwiseFunctor<pointwise::silu>>{
          x, activated, problem.k, PointwiseFunctor<pointwise::silu>(problem.attributes)});
    case SkinnyActivation::gelu:
      return launch(GatedInput<T, PointwiseFunctor<pointwise::gelu>>{
          x, activated, problem.k, PointwiseFunctor<pointwise::gelu>(problem.attributes)});
  }
  TESSERA_CHECK(false, "unknown skinny activation {}", static_cast<int>(problem.activation));
}

// Warps per block along k: enough blocks x warps to reach the target per SM, each warp keeping
// at least one full unrolled step group; a power of two up to `max_splits`.
int choose_splits(int64_t blocks, int64_t steps, int unroll, int max_splits, int device) {
  const int64_t target = static_cast<int64_t>(device_limits(device).sm_count) * kTargetWarpsPerSm;
  int splits = 1;
  while (splits < max_splits && blocks * splits < target && steps >= 2LL * splits * unroll)
    splits *= 2;
  return splits;
}

// `blocks`: the launch's grid size.
SkinnyArgs skinny_args(const SkinnyProblem& problem, int64_t blocks) {
  return SkinnyArgs{
      problem.x,
      problem.weight,
      problem.bias,
      problem.out,
      static_cast<int>(problem.m),
      static_cast<int>(problem.n),
      problem.k,
      problem.prefetch,
      static_cast<int>(std::min<int64_t>(blocks, device_limits(problem.device).sm_count)),
      1};
}

template <typename T, int kRows, int kTokens>
void launch_simt(const SkinnyProblem& problem, gpuStream_t stream) {
  const int64_t row_tiles = ceil_div(problem.n, kRows);
  const int64_t token_groups = ceil_div(problem.m, kTokens);
  const int64_t steps = ceil_div(problem.k, static_cast<int64_t>(kWarp) * kPack<T>);
  const int splits = choose_splits(row_tiles * token_groups, steps, kSimtUnroll<T, kRows>,
                                   kSimtMaxSplits<kRows>, problem.device);
  const size_t shared = static_cast<size_t>(splits) * kRows * kTokens * sizeof(float);
  DeviceGuard device(problem.device);
  with_input<T>(problem, [&]<typename Input>(const Input& input) {
    launch_programmatic(
        skinny_simt_kernel<T, kRows, kTokens, Input>,
        dim3(static_cast<unsigned int>(token_groups), static_cast<unsigned int>(row_tiles)),
        dim3(static_cast<unsigned int>(splits * kWarp)), shared, stream, problem.device,
        skinny_args(problem, row_tiles * token_groups), input);
  });
  GPU_CHECK_LAUNCH("skinny_simt");
}

// The simt variant with kRows rows per warp: x rows per block the next power of two >= m.
template <int kRows>
void launch_simt_rows(const SkinnyProblem& problem, gpuStream_t stream) {
  visit_device_float_dtype("linear", problem.dtype, [&]<typename T>() {
    switch (next_power_of_two(problem.m)) {
      case 1:
        return launch_simt<T, kRows, 1>(problem, stream);
      case 2:
        return launch_simt<T, kRows, 2>(problem, stream);
      case 4:
        return launch_simt<T, kRows, 4>(problem, stream);
      default:
        if constexpr (kSimtMaxTokens<kRows> >= 8) {
          return launch_simt<T, kRows, 8>(problem, stream);
        } else {
          TESSERA_CHECK(false, "simt_r{} takes at most {} rows of x, got {}", kRows,
                        kSimtMaxTokens<kRows>, problem.m);
        }
    }
  });
}

template <int kRows>
bool simt_fits(const SkinnyProblem& problem) {
  return common_fit(problem) && problem.m <= kSimtMaxTokens<kRows> &&
         ceil_div(problem.n, kRows) <= 65535;
}

#if !defined(TESSERA_GPU_HIP)

// Warps of a block along weight rows while the blocks still outnumber the SMs, then warps along
// k (splits) while the grid stays within the resident warps it aims for and each warp keeps at
// least two steps (four measured slower: docs/performance.md "Skinny GEMM layout"). Timed in
// skinny_gemm_lab (1B shapes, M 8 and 32; docs/perf/decode_log.md): gate_up takes 4 row warps x
// 2 splits, qkv 1 x 8, o and down 1 x 16, the LM head 8 x 1.
struct MmaLayout {
  int row_warps = 1;
  int splits = 1;
  int64_t blocks = 0;
};

MmaLayout choose_mma_layout(int64_t row_tiles, int64_t token_groups, int64_t steps, int max_warps,
                            int device) {
  const int64_t sm_count = device_limits(device).sm_count;
  MmaLayout layout;
  while (layout.row_warps < kMmaMaxRowWarps &&
         ceil_div(row_tiles, int64_t{layout.row_warps} * 2) * token_groups >= sm_count)
    layout.row_warps *= 2;
  layout.blocks = ceil_div(row_tiles, int64_t{layout.row_warps}) * token_groups;
  const int64_t target = sm_count * kMmaTargetWarpsPerSm;
  while (layout.row_warps * layout.splits * 2 <= max_warps &&
         layout.blocks * layout.row_warps * layout.splits * 2 <= target &&
         steps >= 4LL * layout.splits)
    layout.splits *= 2;
  return layout;
}

template <typename T, int kTiles>
void launch_mma(const SkinnyProblem& problem, gpuStream_t stream) {
  const int64_t row_tiles = ceil_div(problem.n, kMmaRows);
  const int64_t token_groups = ceil_div(problem.m, 8 * kTiles);
  const MmaLayout layout = choose_mma_layout(row_tiles, token_groups, ceil_div(problem.k, kMmaStep),
                                             kMmaMaxWarps<kTiles>, problem.device);
  const int warps = layout.row_warps * layout.splits;
  const size_t shared =
      layout.splits == 1 ? 0 : static_cast<size_t>(warps) * kTiles * 4 * 32 * sizeof(float);
  SkinnyArgs args = skinny_args(problem, layout.blocks);
  args.row_warps = layout.row_warps;
  DeviceGuard device(problem.device);
  with_input<T>(problem, [&]<typename Input>(const Input& input) {
    launch_programmatic(skinny_mma_kernel<T, kTiles, Input>,
                        dim3(static_cast<unsigned int>(token_groups),
                             static_cast<unsigned int>(layout.blocks / token_groups)),
                        dim3(static_cast<unsigned int>(warps * 32)), shared, stream, problem.device,
                        args, input);
  });
  GPU_CHECK_LAUNCH("skinny_mma");
}

// At most kTiles tiles of 8 rows of x per block: fewer when m needs fewer.
template <int kTiles>
void launch_mma_tiles(const SkinnyProblem& problem, gpuStream_t stream) {
  auto launch = [&]<typename T>() {
    switch (std::min<int64_t>(kTiles, next_power_of_two(ceil_div(problem.m, 8)))) {
      case 1:
        return launch_mma<T, 1>(problem, stream);
      case 2:
        return launch_mma<T, 2>(problem, stream);
      case 4:
        return launch_mma<T, 4>(problem, stream);
      default:
        return launch_mma<T, 8>(problem, stream);
    }
  };
  if (problem.dtype == DType::bf16) return launch.template operator()<gpu_bfloat16>();
  return launch.template operator()<gpu_half>();
}

// mma_tX runs m rows in groups of X tiles; each group re-reads the weight (from L2 when the
// groups of a weight tile run side by side), so X below m / 64 rows is not offered, nor X above
// what m needs (the smaller variant is the same kernel).
template <int kTiles>
bool mma_fits(const SkinnyProblem& problem) {
  if (!common_fit(problem) || (problem.dtype != DType::bf16 && problem.dtype != DType::f16))
    return false;
  if (device_limits(problem.device).compute_major < 8) return false;
  const int64_t tiles_needed = next_power_of_two(ceil_div(problem.m, 8));
  return kTiles <= tiles_needed && tiles_needed <= 8 * kTiles &&
         ceil_div(problem.n, kMmaRows) <= 65535 && problem.k < (int64_t{1} << 30);
}

#endif  // !TESSERA_GPU_HIP

const SkinnyVariant kVariants[] = {
    {"simt_r2", simt_fits<2>, launch_simt_rows<2>},
    {"simt_r4", simt_fits<4>, launch_simt_rows<4>},
    {"simt_r8", simt_fits<8>, launch_simt_rows<8>},
    {"simt_r16", simt_fits<16>, launch_simt_rows<16>},
#if !defined(TESSERA_GPU_HIP)
    {"mma_t1", mma_fits<1>, launch_mma_tiles<1>},
    {"mma_t2", mma_fits<2>, launch_mma_tiles<2>},
    {"mma_t4", mma_fits<4>, launch_mma_tiles<4>},
    {"mma_t8", mma_fits<8>, launch_mma_tiles<8>},
#endif
};

[[maybe_unused]] const bool registered = [] {
  for (const SkinnyVariant& variant : kVariants)
    register_linear_variant(kGpuDeviceType, variant.name);
  return true;
}();

}  // namespace

std::span<const SkinnyVariant> skinny_variants() {
  return kVariants;
}

SkinnyProblem linear_problem(const Tensor& x, const Tensor& weight, const Tensor* bias,
                             const Tensor& out) {
  SkinnyProblem problem;
  problem.k = x.dim() > 0 ? x.sizes().back() : 0;
  problem.m = problem.k > 0 ? x.numel() / problem.k : 0;
  problem.n = weight.dim() > 0 ? weight.size(0) : 0;
  problem.x = x.data_ptr();
  problem.weight = weight.data_ptr();
  problem.bias = bias != nullptr ? bias->data_ptr() : nullptr;
  problem.out = out.data_ptr();
  problem.dtype = x.dtype();
  problem.device = x.device().index;
  return problem;
}

SkinnyProblem gated_linear_problem(const Tensor& gated, const Tensor& weight, const Tensor* bias,
                                   const Tensor& out, const Tensor& activated,
                                   SkinnyActivation activation, const Attributes& attributes) {
  SkinnyProblem problem = linear_problem(activated, weight, bias, out);
  problem.x = gated.data_ptr();
  problem.activation = activation;
  problem.activated = activated.data_ptr();
  problem.attributes = attributes;
  return problem;
}

const SkinnyVariant* find_skinny_variant(const char* name) {
  for (const SkinnyVariant& variant : kVariants)
    if (std::strcmp(variant.name, name) == 0) return &variant;
  return nullptr;
}

}  // namespace tessera::gpu
