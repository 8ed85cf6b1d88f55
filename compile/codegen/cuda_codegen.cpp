#include "compile/codegen/cuda_codegen.h"

#include <algorithm>
#include <limits>
#include <set>

#include "compile/codegen/scalar_math_text.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// What differs between the vendors' compilers: the 16-bit float types (both with the buffers'
// layout, 2-byte bit patterns) and their conversions, the warp width and its shuffle. NVRTC takes
// the toolkit's types. hipRTC (ROCm 5.2) has no bf16 header, so bf16 is its bit pattern, rounded
// to nearest even here as the toolkits do, and f16 is the compiler's _Float16.
constexpr const char* kCudaDialect = R"(#include <cuda_bf16.h>
#include <cuda_fp16.h>

typedef __nv_bfloat16 tsr_bf16;
typedef __half tsr_f16;
#define TSR_WARP 32
// Programmatic dependent launch (runtime/backend/programmatic_launch.h): wait for the grids before this
// one before reading their outputs, and let the next grid be scheduled.
static __device__ __forceinline__ void tsr_wait_for_prior_grids() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#define TSR_SHFL_XOR(v, mask) __shfl_xor_sync(0xffffffffu, (v), (mask))
static __device__ __forceinline__ float tsr_bf16_to_float(tsr_bf16 v) {
  return __bfloat162float(v);
}
static __device__ __forceinline__ tsr_bf16 tsr_float_to_bf16(float v) {
  return __float2bfloat16_rn(v);
}
static __device__ __forceinline__ float tsr_f16_to_float(tsr_f16 v) { return __half2float(v); }
static __device__ __forceinline__ tsr_f16 tsr_float_to_f16(float v) { return __float2half_rn(v); }
)";

constexpr const char* kHipDialect = R"(struct tsr_bf16 {
  unsigned short bits;
};
typedef _Float16 tsr_f16;
#define TSR_WARP 64
static __device__ __forceinline__ void tsr_wait_for_prior_grids() {}  // no PDL on HIP
#define TSR_SHFL_XOR(v, mask) __shfl_xor((v), (mask))
static __device__ __forceinline__ float tsr_bf16_to_float(tsr_bf16 v) {
  return __uint_as_float((unsigned int)v.bits << 16);
}
static __device__ __forceinline__ tsr_bf16 tsr_float_to_bf16(float v) {
  const unsigned int u = __float_as_uint(v);
  tsr_bf16 r;
  if ((u & 0x7fffffffu) > 0x7f800000u)
    r.bits = (unsigned short)((u >> 16) | 0x40u);  // a NaN stays a (quiet) NaN
  else
    r.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return r;
}
static __device__ __forceinline__ float tsr_f16_to_float(tsr_f16 v) { return (float)v; }
static __device__ __forceinline__ tsr_f16 tsr_float_to_f16(float v) { return (tsr_f16)v; }
)";

// Loads, stores and math shared by every generated GPU kernel: the same API as the C++ prelude
// (cpp_codegen.cpp). The runtime compilers have no C library headers: the integer types and the
// float constants the expressions use are defined here.
constexpr const char* kPrelude = R"(
typedef long long int64_t;
typedef int int32_t;
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

static __device__ __forceinline__ float tsr_ld(const float* p, int64_t i) { return p[i]; }
static __device__ __forceinline__ float tsr_ld(const tsr_bf16* p, int64_t i) {
  return tsr_bf16_to_float(p[i]);
}
static __device__ __forceinline__ float tsr_ld(const tsr_f16* p, int64_t i) {
  return tsr_f16_to_float(p[i]);
}
static __device__ __forceinline__ void tsr_st(float* p, int64_t i, float v) { p[i] = v; }
static __device__ __forceinline__ void tsr_st(tsr_bf16* p, int64_t i, float v) {
  p[i] = tsr_float_to_bf16(v);
}
static __device__ __forceinline__ void tsr_st(tsr_f16* p, int64_t i, float v) {
  p[i] = tsr_float_to_f16(v);
}
// Vector access: kCount consecutive elements as one aligned access (16 bytes at most).
template <typename T, int kCount>
struct alignas(sizeof(T) * kCount) tsr_vec {
  T lanes[kCount];
};
// v[lane] = p[i + lane]. When `vector`, p + i is aligned to min(16, sizeof(T) * kLanes) bytes
// and read in accesses of that size; else element by element (a buffer that is not aligned).
template <typename T, int kLanes>
static __device__ __forceinline__ void tsr_ldv(const T* p, int64_t i, float (&v)[kLanes],
                                               bool vector) {
  constexpr int kChunk = sizeof(T) * kLanes < 16 ? kLanes : int(16 / sizeof(T));
  if (!vector) {
#pragma unroll
    for (int lane = 0; lane < kLanes; ++lane) v[lane] = tsr_ld(p, i + lane);
    return;
  }
#pragma unroll
  for (int c = 0; c < kLanes; c += kChunk) {
    const tsr_vec<T, kChunk> chunk = *reinterpret_cast<const tsr_vec<T, kChunk>*>(p + i + c);
#pragma unroll
    for (int lane = 0; lane < kChunk; ++lane) v[c + lane] = tsr_ld(chunk.lanes, lane);
  }
}
// p[i + lane] = v[lane]: one 16-byte store when `vector` (p + i 16-byte aligned), else
// element by element.
template <typename T, int kLanes>
static __device__ __forceinline__ void tsr_stv(T* p, int64_t i, const float (&v)[kLanes],
                                               bool vector) {
  static_assert(sizeof(T) * kLanes == 16, "a vector store is 16 bytes");
  if (!vector) {
#pragma unroll
    for (int lane = 0; lane < kLanes; ++lane) tsr_st(p, i + lane, v[lane]);
    return;
  }
  tsr_vec<T, kLanes> packed;
#pragma unroll
  for (int lane = 0; lane < kLanes; ++lane) tsr_st(packed.lanes, lane, v[lane]);
  *reinterpret_cast<tsr_vec<T, kLanes>*>(p + i) = packed;
}
static __device__ __forceinline__ float tsr_round_bf16(float v) {
  return tsr_bf16_to_float(tsr_float_to_bf16(v));
}
static __device__ __forceinline__ float tsr_round_f16(float v) {
  return tsr_f16_to_float(tsr_float_to_f16(v));
}
// The reductions' max: NaN in either gives NaN.
static __device__ __forceinline__ float tsr_max(float a, float b) {
  return (a != a || b != b) ? NAN : (a > b ? a : b);
}

// Warp and block reductions; every participating thread gets the result.
static __device__ __forceinline__ float tsr_warp_sum(float v) {
  for (int mask = TSR_WARP / 2; mask > 0; mask >>= 1) v += TSR_SHFL_XOR(v, mask);
  return v;
}
static __device__ __forceinline__ float tsr_warp_max(float v) {
  for (int mask = TSR_WARP / 2; mask > 0; mask >>= 1)
    v = tsr_max(v, TSR_SHFL_XOR(v, mask));
  return v;
}
// `scratch` holds one float per warp; the trailing barrier lets the next call reuse it.
template <int kWarps>
static __device__ __forceinline__ float tsr_block_sum(float v, float* scratch) {
  v = tsr_warp_sum(v);
  if (threadIdx.x % TSR_WARP == 0) scratch[threadIdx.x / TSR_WARP] = v;
  __syncthreads();
  v = threadIdx.x % TSR_WARP < kWarps ? scratch[threadIdx.x % TSR_WARP] : 0.0f;
  v = tsr_warp_sum(v);
  __syncthreads();
  return v;
}
template <int kWarps>
static __device__ __forceinline__ float tsr_block_max(float v, float* scratch) {
  v = tsr_warp_max(v);
  if (threadIdx.x % TSR_WARP == 0) scratch[threadIdx.x / TSR_WARP] = v;
  __syncthreads();
  v = threadIdx.x % TSR_WARP < kWarps ? scratch[threadIdx.x % TSR_WARP] : -INFINITY;
  v = tsr_warp_max(v);
  __syncthreads();
  return v;
}
#define TSR_SCALAR static __device__ __forceinline__
)";

// The dialect's part, the prelude, then the pointwise formulas the hand-written kernels compile
// too.
std::string prelude(GpuDialect dialect) {
  return std::string(dialect == GpuDialect::hip ? kHipDialect : kCudaDialect) + kPrelude +
         kScalarMathSource;
}

int warp_size(GpuDialect dialect) {
  return dialect == GpuDialect::hip ? 64 : 32;
}

constexpr size_t kStaticSharedLimit = 48 * 1024;  // bytes of static __shared__ per block

// A reduction with several results per row (per-head norms) gives each warp its own groups
// when there are enough groups or they are short; otherwise the whole block reduces each group.
bool warp_per_group(const RowReduction& reduction, int block_size, int warp) {
  return reduction.groups > 1 &&
         (reduction.groups >= block_size / warp || reduction.length <= 16 * warp);
}

int checked_int(int64_t value, const char* what) {
  TESSERA_CHECK(value >= 0 && value <= std::numeric_limits<int>::max(),
                "row kernel {} {} does not fit a 32-bit loop counter", what, value);
  return static_cast<int>(value);
}

std::string scaled(const RowReduction& reduction) {
  return reduction.scale == 1.0 ? "acc" : fmt::format("acc * {:.9g}f", reduction.scale);
}

std::string reduction_source(const RowReduction& r, int block_size, int warp) {
  const int groups = checked_int(r.groups, "reduction groups");
  const int length = checked_int(r.length, "reduction length");
  const char* init = r.is_max ? "-INFINITY" : "0.0f";
  const char* combine = r.is_max ? "acc = tsr_max(acc, v);" : "acc += v;";
  std::string source = fmt::format("  __shared__ float {}[{}];\n", r.array, std::max(groups, 1));
  if (warp_per_group(r, block_size, warp)) {
    source += fmt::format("  for (int g = warp; g < {}; g += TSR_WARPS) {{\n", groups);
    source += fmt::format("    float acc = {};\n", init);
    source += fmt::format("    for (int k = lane; k < {}; k += TSR_WARP) {{\n", length);
    source += fmt::format("      float v = {};\n      {}\n    }}\n", r.element, combine);
    source += fmt::format("    acc = {}(acc);\n", r.is_max ? "tsr_warp_max" : "tsr_warp_sum");
    source += fmt::format("    if (lane == 0) {}[g] = {};\n  }}\n", r.array, scaled(r));
  } else {
    source += fmt::format("  for (int g = 0; g < {}; ++g) {{\n", groups);
    source += fmt::format("    float acc = {};\n", init);
    source += fmt::format("    for (int k = threadIdx.x; k < {}; k += TSR_BLOCK) {{\n", length);
    source += fmt::format("      float v = {};\n      {}\n    }}\n", r.element, combine);
    source += fmt::format("    acc = {}<TSR_WARPS>(acc, tsr_scratch);\n",
                          r.is_max ? "tsr_block_max" : "tsr_block_sum");
    source += fmt::format("    if (threadIdx.x == 0) {}[g] = {};\n  }}\n", r.array, scaled(r));
  }
  // The results are read by every thread, in later reductions and in the outputs.
  source += "  __syncthreads();\n";
  return source;
}

// Bytes of each access of a vector load of `lanes` elements of `dtype` (tsr_ldv's chunks).
int64_t vector_load_access_bytes(DType dtype, int64_t lanes) {
  return std::min<int64_t>(kVectorBytes, static_cast<int64_t>(element_size(dtype)) * lanes);
}

// True at run time when output `o` and the inputs it loads as vectors are aligned to their
// accesses. Their offsets are multiples of the lanes, so aligned bases keep every group aligned.
std::string vector_alignment_test(const RowKernelBody& body, size_t o) {
  const RowOutput& out = body.outputs[o];
  std::string test = fmt::format("(((unsigned long long)out{} & {})", o, kVectorBytes - 1);
  std::set<int> inputs;
  for (const RowVectorLoad& load : out.vector.loads) inputs.insert(load.input);
  for (int input : inputs) {
    int64_t bytes = vector_load_access_bytes(body.input_dtypes[input], out.vector.lanes);
    test += fmt::format(" | ((unsigned long long)in{} & {})", input, bytes - 1);
  }
  return test + ") == 0";
}

// Each thread computes groups of `lanes` consecutive elements: the vector loads once per group,
// the element expression per lane (unrolled), one 16-byte store.
std::string vector_loop(const RowKernelBody& body, size_t o) {
  const RowOutput& out = body.outputs[o];
  const int lanes = checked_int(out.vector.lanes, "vector lanes");
  const int elements = checked_int(out.row_elements, "output row");
  TESSERA_CHECK(lanes > 1 && elements % lanes == 0 &&
                    static_cast<int64_t>(element_size(out.dtype)) * lanes == kVectorBytes,
                "output {} of {} elements has a malformed vector form of {} lanes", o, elements,
                lanes);
  // Most rows take one group per thread: unrolling the group loop would only add code.
  std::string source = "#pragma unroll 1\n";
  source += fmt::format(
      "    for (int tsr_first = {0} * (tsr_part * TSR_BLOCK + threadIdx.x); tsr_first < {1}; "
      "tsr_first += {0} * TSR_ROW_BLOCKS * TSR_BLOCK) {{\n",
      lanes, elements);
  if (!out.vector.loads.empty()) {
    for (const RowVectorLoad& load : out.vector.loads)
      source += fmt::format("      float {}[{}];\n", load.array, lanes);
    source += "      {\n        const int i = tsr_first;\n";
    for (const RowVectorLoad& load : out.vector.loads)
      source += fmt::format("        tsr_ldv(in{}, {}, {}, tsr_aligned);\n", load.input,
                            load.offset, load.array);
    source += "      }\n";
  }
  source += fmt::format("      float tsr_out[{}];\n", lanes);
  source += "#pragma unroll\n";
  source += fmt::format("      for (int tsr_lane = 0; tsr_lane < {}; ++tsr_lane) {{\n", lanes);
  // Vector loads often cover every read of `i`.
  source += "        const int i = tsr_first + tsr_lane;\n        (void)i;\n";
  source += fmt::format("        tsr_out[tsr_lane] = {};\n", out.vector.element);
  source += "      }\n";
  source += fmt::format("      tsr_stv(out{}, row * {} + tsr_first, tsr_out, tsr_aligned);\n", o,
                        elements);
  source += "    }\n";
  return source;
}

}  // namespace

int cuda_block_size(const RowKernelBody& body) {
  int64_t widest = 0;
  for (const RowReduction& r : body.reductions) widest = std::max(widest, r.groups * r.length);
  for (const RowOutput& out : body.outputs) widest = std::max(widest, out.row_elements);
  return widest >= 1024 ? 256 : 128;
}

int cuda_blocks_per_row(const RowKernelBody& body) {
  if (!body.reductions.empty()) return 1;
  constexpr int64_t kMaxBlocksPerRow = 256;
  int64_t blocks = 1;
  for (const RowOutput& out : body.outputs) {
    // A thread writes one 16-byte group per pass in the vector form, else one element: a scalar
    // element waits on its own loads, and a thread taking several waits for each in turn.
    const int64_t per_block =
        static_cast<int64_t>(cuda_block_size(body)) * std::max<int64_t>(out.vector.lanes, 1);
    blocks = std::max(blocks, (out.row_elements + per_block - 1) / per_block);
  }
  return static_cast<int>(std::min(blocks, kMaxBlocksPerRow));
}

std::string generate_cuda_kernel(const RowKernelBody& body, GpuDialect dialect) {
  const int block_size = cuda_block_size(body);
  const int warp = warp_size(dialect);
  const size_t num_buffers = body.input_dtypes.size() + body.outputs.size();
  TESSERA_CHECK(num_buffers > 0, "a row kernel without buffers");
  size_t shared_bytes = static_cast<size_t>(block_size / warp) * sizeof(float);
  for (const RowReduction& r : body.reductions)
    shared_bytes += static_cast<size_t>(r.groups) * sizeof(float);
  TESSERA_REQUIRE(shared_bytes <= kStaticSharedLimit,
                  "a fused row kernel needs {} bytes of shared memory for its per-row reductions "
                  "(GPU row kernels have {}); turn fusion off (compilation.pass_config."
                  "enable_fusion: false) for this model",
                  shared_bytes, kStaticSharedLimit);

  std::string source = prelude(dialect);
  source +=
      fmt::format("\n#define TSR_BLOCK {}\n#define TSR_WARPS (TSR_BLOCK / TSR_WARP)\n", block_size);
  // A row's elements are split over TSR_ROW_BLOCKS blocks (cuda_blocks_per_row): block b of row
  // r is grid block r * TSR_ROW_BLOCKS + b and takes every TSR_ROW_BLOCKS-th stretch of the row.
  source += fmt::format("#define TSR_ROW_BLOCKS {}\n", cuda_blocks_per_row(body));
  source += fmt::format("struct tsr_buffers {{ void* p[{}]; }};\n\n", num_buffers);
  source +=
      "extern \"C\" __global__ void __launch_bounds__(TSR_BLOCK)\n"
      "tessera_kernel(long long rows, tsr_buffers buffers) {\n"
      "  const int64_t row = blockIdx.x / TSR_ROW_BLOCKS;\n"
      "  const int tsr_part = blockIdx.x % TSR_ROW_BLOCKS;\n"
      "  (void)tsr_part;\n"
      "  if (row >= rows) return;\n"
      "  tsr_wait_for_prior_grids();\n";
  size_t slot = 0;
  for (size_t i = 0; i < body.input_dtypes.size(); ++i, ++slot) {
    const char* type = prelude_type(body.input_dtypes[i]);
    source += fmt::format("  const {0}* __restrict__ in{1} = (const {0}*)buffers.p[{2}];\n", type,
                          i, slot);
  }
  for (size_t i = 0; i < body.outputs.size(); ++i, ++slot) {
    const char* type = prelude_type(body.outputs[i].dtype);
    source += fmt::format("  {0}* __restrict__ out{1} = ({0}*)buffers.p[{2}];\n", type, i, slot);
  }
  if (!body.reductions.empty()) {
    source += "  const int lane = threadIdx.x % TSR_WARP;\n";
    source += "  const int warp = threadIdx.x / TSR_WARP;\n";
    source += "  __shared__ float tsr_scratch[TSR_WARPS];\n";
    source += "  (void)lane; (void)warp; (void)tsr_scratch;\n";
  }
  for (const RowReduction& r : body.reductions) source += reduction_source(r, block_size, warp);
  for (size_t o = 0; o < body.outputs.size(); ++o) {
    const RowOutput& out = body.outputs[o];
    const int elements = checked_int(out.row_elements, "output row");
    if (out.vector.lanes == 0) {
      source += fmt::format(
          "  for (int i = tsr_part * TSR_BLOCK + threadIdx.x; i < {}; i += TSR_ROW_BLOCKS * "
          "TSR_BLOCK) {{\n",
          elements);
      source += fmt::format("    tsr_st(out{}, row * {} + i, {});\n", o, elements, out.element);
      source += "  }\n";
      continue;
    }
    // Buffers that are not aligned to the vector accesses (views into other tensors) are read
    // and written element by element; the arena's buffers always are aligned.
    source += "  {\n";
    source += fmt::format("    const bool tsr_aligned = {};\n", vector_alignment_test(body, o));
    source += vector_loop(body, o);
    source += "  }\n";
  }
  source += "}\n";
  return source;
}

}  // namespace tessera
