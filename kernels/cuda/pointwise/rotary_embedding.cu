// GPU kernel of the custom op rotary_embedding (compile/ops/custom/rotary_embedding.cpp), with
// the semantics of the CPU kernel (kernels/cpu/rotary_embedding.cpp): f32 compute with cos and sin
// straight from the cache (any float dtype), outputs rounded once, neox pairs (i, i + rot_dim / 2)
// or gptj pairs (2i, 2i + 1), dims past rot_dim copied through.
//
// One block per token rotates the query and the key heads in one launch: the block stages the
// token's cos/sin row in shared memory as f32, then its threads walk (head, group of pairs) items
// over both tensors. When head_size and rot_dim allow and the pointers are aligned, an item is
// 16 bytes of each operand (neox: a pack of first-half and a pack of second-half elements; gptj: a
// pack of adjacent pairs); otherwise an item is one pair.
//
// A position outside the cache cannot raise an error from the device without a synchronization,
// so its rotated dims come out NaN (visibly wrong) instead of reading out of bounds.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/kernel_checks.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

constexpr const char* kOp = "rotary_embedding";
constexpr int kMaxThreads = 512;

struct RotaryParams {
  const void* positions;
  bool positions_i64;
  int64_t max_position;
  int query_heads;
  int key_heads;
  int head_size;
  int rot_dim;
  // Elements from one token's input row to the next (the widths when contiguous; wider for
  // the column slices of a qkv projection, which rotary_attention passes).
  int64_t query_stride;
  int64_t key_stride;
};

// N elements as f32: one packed access when kVector, else element by element (any alignment).
template <int N, bool kVector, typename T>
__device__ __forceinline__ void load_floats(const T* source, float (&values)[N]) {
  if constexpr (kVector) {
    const Pack<T, N> pack = load_pack<N>(source);
#pragma unroll
    for (int j = 0; j < N; ++j) values[j] = to_compute(pack.values[j]);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) values[j] = to_compute(source[j]);
  }
}

template <int N, bool kVector, typename T>
__device__ __forceinline__ void store_floats(T* target, const float (&values)[N]) {
  if constexpr (kVector) {
    Pack<T, N> pack;
#pragma unroll
    for (int j = 0; j < N; ++j) pack.values[j] = from_compute<T>(values[j]);
    store_pack<N>(target, pack);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) target[j] = from_compute<T>(values[j]);
  }
}

// Rotates pairs [first_pair, first_pair + kPairs) of one head.
template <bool kNeox, int kPairs, bool kVector, typename T>
__device__ __forceinline__ void rotate_pairs(const T* in, T* out, int first_pair, int half,
                                             const float* cos, const float* sin) {
  float x1[kPairs];
  float x2[kPairs];
  if constexpr (kNeox) {
    load_floats<kPairs, kVector>(in + first_pair, x1);
    load_floats<kPairs, kVector>(in + half + first_pair, x2);
  } else {
    float pairs[2 * kPairs];
    load_floats<2 * kPairs, kVector>(in + 2 * first_pair, pairs);
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      x1[j] = pairs[2 * j];
      x2[j] = pairs[2 * j + 1];
    }
  }
  float y1[kPairs];
  float y2[kPairs];
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    const float c = cos[first_pair + j];
    const float s = sin[first_pair + j];
    y1[j] = x1[j] * c - x2[j] * s;
    y2[j] = x2[j] * c + x1[j] * s;
  }
  if constexpr (kNeox) {
    store_floats<kPairs, kVector>(out + first_pair, y1);
    store_floats<kPairs, kVector>(out + half + first_pair, y2);
  } else {
    float pairs[2 * kPairs];
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      pairs[2 * j] = y1[j];
      pairs[2 * j + 1] = y2[j];
    }
    store_floats<2 * kPairs, kVector>(out + 2 * first_pair, pairs);
  }
}

// kPairs pairs per item; kCopy elements per item of the pass-through copy (dims past rot_dim).
template <typename T, typename CacheT, bool kNeox, int kPairs, bool kVector>
__global__ void __launch_bounds__(kMaxThreads)
    rotary_embedding_kernel(RotaryParams params, const T* query, const T* key, const CacheT* cache,
                            T* query_out, T* key_out) {
  extern __shared__ float cos_sin[];  // [rot_dim]: cos, then sin
  const int64_t token = blockIdx.x;
  const int64_t position = params.positions_i64
                               ? static_cast<const int64_t*>(params.positions)[token]
                               : static_cast<const int32_t*>(params.positions)[token];
  const bool valid = position >= 0 && position < params.max_position;
  const CacheT* cache_row = cache + (valid ? position : 0) * params.rot_dim;
  for (int i = threadIdx.x; i < params.rot_dim; i += blockDim.x) {
    cos_sin[i] = valid ? to_float(cache_row[i]) : std::numeric_limits<float>::quiet_NaN();
  }
  __syncthreads();

  const int half = params.rot_dim / 2;
  const int query_width = params.query_heads * params.head_size;
  const int key_width = params.key_heads * params.head_size;
  const T* query_row = query + token * params.query_stride;
  const T* key_row = key + token * params.key_stride;
  T* query_out_row = query_out + token * query_width;
  T* key_out_row = key_out + token * key_width;
  const int heads = params.query_heads + params.key_heads;

  const int groups_per_head = half / kPairs;
  for (int item = threadIdx.x; item < heads * groups_per_head; item += blockDim.x) {
    const int head = item / groups_per_head;
    const int group = item - head * groups_per_head;
    const bool is_query = head < params.query_heads;
    const int offset = (is_query ? head : head - params.query_heads) * params.head_size;
    rotate_pairs<kNeox, kPairs, kVector>((is_query ? query_row : key_row) + offset,
                                         (is_query ? query_out_row : key_out_row) + offset,
                                         group * kPairs, half, cos_sin, cos_sin + half);
  }

  // Dims past rot_dim: copied as they are, in packs of the rotation's width.
  constexpr int kCopy = kVector ? (kNeox ? kPairs : 2 * kPairs) : 1;
  const int copies_per_head = (params.head_size - params.rot_dim) / kCopy;
  for (int item = threadIdx.x; item < heads * copies_per_head; item += blockDim.x) {
    const int head = item / copies_per_head;
    const int copy = item - head * copies_per_head;
    const bool is_query = head < params.query_heads;
    const int offset = (is_query ? head : head - params.query_heads) * params.head_size +
                       params.rot_dim + copy * kCopy;
    const T* source = (is_query ? query_row : key_row) + offset;
    T* target = (is_query ? query_out_row : key_out_row) + offset;
    store_pack<kCopy>(target, load_pack<kCopy>(source));
  }
}

struct RotaryTensors {
  const Tensor& query;
  const Tensor& key;
  const Tensor& cache;
  const Tensor& query_out;
  const Tensor& key_out;
};

template <typename T, typename CacheT, bool kNeox, int kPairs, bool kVector>
void launch_rotary(const RotaryParams& params, const RotaryTensors& tensors, int64_t tokens,
                   gpuStream_t stream) {
  const int heads = params.query_heads + params.key_heads;
  const int64_t items = static_cast<int64_t>(heads) * (params.rot_dim / 2 / kPairs);
  const int threads = static_cast<int>(std::clamp<int64_t>(
      ceil_div(items, GPU_WARP_SIZE) * GPU_WARP_SIZE, GPU_WARP_SIZE, kMaxThreads));
  const size_t shared_bytes = static_cast<size_t>(params.rot_dim) * sizeof(float);
  rotary_embedding_kernel<T, CacheT, kNeox, kPairs, kVector>
      <<<static_cast<unsigned int>(tokens), threads, shared_bytes, stream>>>(
          params, static_cast<const T*>(tensors.query.data_ptr()),
          static_cast<const T*>(tensors.key.data_ptr()),
          static_cast<const CacheT*>(tensors.cache.data_ptr()),
          static_cast<T*>(tensors.query_out.data_ptr()),
          static_cast<T*>(tensors.key_out.data_ptr()));
  GPU_CHECK_LAUNCH(kOp);
}

template <typename T, typename CacheT, bool kNeox>
void launch_rotary_style(const RotaryParams& params, const RotaryTensors& tensors, int64_t tokens,
                         gpuStream_t stream) {
  constexpr int V = kPackElements<T>;  // elements per 16 bytes
  // neox: an item is V first-half and V second-half elements; gptj: V adjacent elements.
  constexpr int kVectorPairs = kNeox ? V : V / 2;
  const int unit = kNeox ? params.rot_dim / 2 : params.rot_dim;
  bool vectorized = unit % V == 0 && params.head_size % V == 0 && params.query_stride % V == 0 &&
                    params.key_stride % V == 0;
  for (const Tensor* tensor :
       {&tensors.query, &tensors.key, &tensors.query_out, &tensors.key_out}) {
    vectorized = vectorized && pack_aligned<T, V>(tensor->data_ptr());
  }
  if (vectorized) {
    launch_rotary<T, CacheT, kNeox, kVectorPairs, true>(params, tensors, tokens, stream);
  } else {
    launch_rotary<T, CacheT, kNeox, 1, false>(params, tensors, tokens, stream);
  }
}

void rotary_embedding_kernel_entry(const KernelArgs& args) {
  const Tensor& positions = args.inputs[0];
  RotaryTensors tensors{args.inputs[1], args.inputs[2], args.inputs[3], args.outputs[0],
                        args.outputs[1]};
  const Tensor& query = tensors.query;
  const Tensor& key = tensors.key;
  const Tensor& cache = tensors.cache;
  // Query and key rows may lie apart (column slices of one qkv row).
  const RotaryShape shape = check_rotary_embedding(args, /*strided_rows=*/true);
  const int64_t tokens = shape.tokens;
  const int64_t head_size = shape.head_size;
  const int64_t rot_dim = shape.rot_dim;
  // The per-token row offsets are 32-bit in the kernel.
  TESSERA_REQUIRE(query.size(1) <= INT32_MAX && key.size(1) <= INT32_MAX && tokens <= INT32_MAX,
                  "{}: query {} and key {} are too wide for the GPU kernel", kOp, query.str(),
                  key.str());
  TESSERA_REQUIRE(rot_dim * static_cast<int64_t>(sizeof(float)) <= 48 * 1024,
                  "{}: rot_dim {} does not fit the kernel's shared memory (at most {})", kOp,
                  rot_dim, 48 * 1024 / sizeof(float));
  if (tokens == 0) return;

  RotaryParams params{};
  params.positions = positions.data_ptr();
  params.positions_i64 = positions.dtype() == DType::i64;
  params.max_position = cache.size(0);
  params.query_heads = static_cast<int>(query.size(1) / head_size);
  params.key_heads = static_cast<int>(key.size(1) / head_size);
  params.head_size = static_cast<int>(head_size);
  params.rot_dim = static_cast<int>(rot_dim);
  params.query_stride = query.stride(0);
  params.key_stride = key.stride(0);

  LaunchScope scope(query.device());
  visit_device_float_dtype(kOp, cache.dtype(), [&]<typename CacheT>() {
    visit_device_float_dtype(kOp, query.dtype(), [&]<typename T>() {
      if (shape.is_neox) {
        launch_rotary_style<T, CacheT, true>(params, tensors, tokens, scope.stream());
      } else {
        launch_rotary_style<T, CacheT, false>(params, tensors, tokens, scope.stream());
      }
    });
  });
}

TESSERA_REGISTER_KERNEL("rotary_embedding", kGpuDeviceType, rotary_embedding_kernel_entry);

}  // namespace
}  // namespace tessera::gpu
