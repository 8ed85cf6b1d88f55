// The attention op on the GPU, with the semantics of the CPU kernel (kernels/cpu/attention.cpp):
// this step's K/V rows are written into the layer's paged cache at slot_mapping (slot -1 skips a
// token), then each new token attends causally over its sequence through the block table, GQA
// aware, with f32 math, optionally within a sliding window and with softcapped scores. Kernels:
// reshape_and_cache (below), decode (attention_decode.cuh: every sequence has one new token; it
// writes the new rows itself where they are rows of contiguous elements, so a decode step with a
// cache of the model's dtype has no reshape_and_cache launch) and prefill/mixed
// (attention_prefill.cuh). Query, key and value rows may lie apart (rotary_attention's qkv slices).
// rotary_attention's kernel is at the end. An FP8 cache (engine.kv_cache_dtype fp8) holds e4m3
// codes of K / key_scale and V / value_scale: reshape_and_cache writes it before every step
// (attention_common.cuh says how kernels read it).
//
// The host reads only metadata scalars (num_seqs, max_query_len, max_seq_len,
// max_blocks_per_seq) and never copies from the device: per-sequence values come from the
// metadata's device tensors, so the launches are stream-ordered and can be captured in a graph.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/attention_metadata.h"
#include "kernels/cuda/attention/attention_decode.cuh"
#include "kernels/cuda/attention/attention_decode_mma.cuh"
#include "kernels/cuda/attention/attention_prefill.cuh"
#include "kernels/cuda/attention/attention_prefill_mma.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/rotary_attention.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu::attention {
namespace {

constexpr char kOp[] = "attention";
constexpr int kCopyThreads = 256;
// Decode splits keys only while fewer blocks than this many per SM would run...
constexpr int64_t kDecodeBlocksPerSm = 2;
// ...and never into partitions shorter than one tile of keys (each partition costs a partial
// result and a share of the combine kernel). Longer minimums left warps idle at short contexts
// (docs/perf/decode_log.md "Decode graphs in length tiers").
constexpr int64_t kMinPartitionKeys = kDecodeTile;
constexpr int kGridLimitYZ = 65535;

// ---- reshape_and_cache: one thread per pack of a K or V row (E elements of width U).

template <typename U, int E>
__global__ void __launch_bounds__(kCopyThreads)
    reshape_and_cache_kernel(const U* key, const U* value, U* key_cache, U* value_cache,
                             const int32_t* slot_mapping, int64_t tokens, int64_t row,
                             int64_t key_stride, int64_t value_stride, int64_t num_slots) {
  wait_for_prior_grids();
  allow_next_grid();
  const int64_t packs_per_row = row / E;
  const int64_t total = tokens * packs_per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t token = i / packs_per_row;
    const int64_t offset = (i % packs_per_row) * E;
    const int64_t slot = slot_mapping[token];
    // -1 marks padding tokens; a slot past the cache cannot be reported without a device sync,
    // so it is skipped rather than written out of bounds.
    if (slot < 0 || slot >= num_slots) continue;
    store_pack<E>(key_cache + slot * row + offset, load_pack<E>(key + token * key_stride + offset));
    store_pack<E>(value_cache + slot * row + offset,
                  load_pack<E>(value + token * value_stride + offset));
  }
}

// Into an FP8 cache: one thread per element, its code rounded as runtime/float8.h rounds.
template <typename T>
__global__ void __launch_bounds__(kCopyThreads)
    reshape_and_cache_float8_kernel(const T* key, const T* value, Float8E4M3* key_cache,
                                    Float8E4M3* value_cache, const int32_t* slot_mapping,
                                    int64_t tokens, int64_t row, int64_t key_stride,
                                    int64_t value_stride, int64_t num_slots, float key_inverse,
                                    float value_inverse) {
  wait_for_prior_grids();
  allow_next_grid();
  const int64_t total = tokens * row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t token = i / row;
    const int64_t offset = i % row;
    const int64_t slot = slot_mapping[token];
    if (slot < 0 || slot >= num_slots) continue;  // as reshape_and_cache_kernel
    key_cache[slot * row + offset] =
        Float8E4M3(to_float(key[token * key_stride + offset]) * key_inverse);
    value_cache[slot * row + offset] =
        Float8E4M3(to_float(value[token * value_stride + offset]) * value_inverse);
  }
}

void reshape_and_cache(const Tensor& key, const Tensor& value, PagedKVCache& cache,
                       const Tensor& slot_mapping, gpuStream_t stream) {
  // Key and value rows: contiguous, or apart (the column slices of one qkv row).
  const int64_t tokens = key.size(0);
  const int64_t row = key.size(1);
  const int64_t key_stride = tokens > 1 ? key.stride(0) : row;
  const int64_t value_stride = tokens > 1 ? value.stride(0) : row;
  const int64_t num_slots = cache.num_blocks() * cache.block_size();
  if (cache.key.dtype() == DType::f8_e4m3) {
    visit_device_float_dtype(kOp, key.dtype(), [&]<typename T>() {
      launch_programmatic(
          reshape_and_cache_float8_kernel<T>,
          dim3(static_cast<unsigned int>(grid_size(tokens * row, kCopyThreads))),
          dim3(kCopyThreads), 0, stream, key.device().index, static_cast<const T*>(key.data_ptr()),
          static_cast<const T*>(value.data_ptr()), static_cast<Float8E4M3*>(cache.key.data_ptr()),
          static_cast<Float8E4M3*>(cache.value.data_ptr()), slot_mapping.data<int32_t>(), tokens,
          row, key_stride, value_stride, num_slots, 1.0f / cache.key_scale,
          1.0f / cache.value_scale);
      GPU_CHECK_LAUNCH("attention reshape_and_cache (FP8)");
    });
    return;
  }
  visit_element_bits(key.dtype(), [&]<typename U>() {
    constexpr int E = static_cast<int>(16 / sizeof(U));
    bool packed = row % E == 0 && key_stride % E == 0 && value_stride % E == 0;
    for (const Tensor* tensor :
         std::initializer_list<const Tensor*>{&key, &value, &cache.key, &cache.value})
      packed = packed && pack_aligned<U, E>(tensor->data_ptr());
    auto launch = [&]<int kElements>() {
      const int64_t items = tokens * (row / kElements);
      launch_programmatic(
          reshape_and_cache_kernel<U, kElements>,
          dim3(static_cast<unsigned int>(grid_size(items, kCopyThreads))), dim3(kCopyThreads), 0,
          stream, key.device().index, static_cast<const U*>(key.data_ptr()),
          static_cast<const U*>(value.data_ptr()), static_cast<U*>(cache.key.data_ptr()),
          static_cast<U*>(cache.value.data_ptr()), slot_mapping.data<int32_t>(), tokens, row,
          key_stride, value_stride, num_slots);
      GPU_CHECK_LAUNCH("attention reshape_and_cache");
    };
    if (packed) {
      launch.template operator()<E>();
    } else {
      launch.template operator()<1>();
    }
  });
}

// Kernels using more than the default 48 KiB of dynamic shared memory must opt in, per kernel and
// device; done once for the largest size seen.
void reserve_shared_memory(const void* kernel, size_t bytes, int device, int64_t head_size) {
  const DeviceLimits& limits = device_limits(device);
  TESSERA_REQUIRE(bytes <= limits.shared_bytes_optin,
                  "attention: head_size {} needs {} KiB of shared memory per block but this GPU "
                  "allows {} KiB; use a model with a smaller head_size or run it on the CPU",
                  head_size, bytes / 1024, limits.shared_bytes_optin / 1024);
  allow_dynamic_shared_memory(kernel, bytes, device);
}

// ---- Launches.

struct Launch {
  int64_t num_seqs;
  int64_t max_query_len;
  int64_t max_seq_len;
  Device device;
  gpuStream_t stream;
};

// The tensor-core prefill: bf16/f16 with head 64 or 128 on CUDA sm_80+.
template <typename T, typename C, int kHeadSize, bool kExact>
bool launch_prefill_on_tensor_cores(const AttentionParams<T, C>& params, const Launch& launch) {
#if defined(TESSERA_GPU_HIP)
  (void)params;
  (void)launch;
  return false;
#else
  if constexpr (kExact && kHasMmaAttention<T>) {
    if (device_limits(launch.device.index).compute_major < 8) return false;
    constexpr size_t kSharedBytes = mma_prefill_shared_bytes<T, kHeadSize>();
    auto* kernel = mma_prefill_attention_kernel<T, C, kHeadSize>;
    reserve_shared_memory(reinterpret_cast<const void*>(kernel), kSharedBytes, launch.device.index,
                          params.head_size);
    const dim3 grid(static_cast<unsigned int>(ceil_div(launch.max_query_len, kMmaQueryTile)),
                    static_cast<unsigned int>(params.num_heads),
                    static_cast<unsigned int>(launch.num_seqs));
    launch_programmatic(kernel, grid, dim3(kMmaThreads), kSharedBytes, launch.stream,
                        launch.device.index, params);
    GPU_CHECK_LAUNCH("attention prefill (tensor cores)");
    return true;
  } else {
    (void)params;
    (void)launch;
    return false;
  }
#endif
}

template <typename T, typename C, int kHeadSize, bool kExact>
void launch_prefill(const AttentionParams<T, C>& params, const Launch& launch) {
  TESSERA_CHECK(params.rope_cos_sin == nullptr, "rotary attention reached a prefill kernel");
  if (launch_prefill_on_tensor_cores<T, C, kHeadSize, kExact>(params, launch)) return;
  const size_t shared_bytes = prefill_shared_bytes(params.head_size);
  auto* kernel = prefill_attention_kernel<T, C, kHeadSize, kExact>;
  reserve_shared_memory(reinterpret_cast<const void*>(kernel), shared_bytes, launch.device.index,
                        params.head_size);
  const dim3 grid(static_cast<unsigned int>(ceil_div(launch.max_query_len, kQueryTile)),
                  static_cast<unsigned int>(params.num_heads),
                  static_cast<unsigned int>(launch.num_seqs));
  launch_programmatic(kernel, grid, dim3(kPrefillThreads), shared_bytes, launch.stream,
                      launch.device.index, params);
  GPU_CHECK_LAUNCH("attention prefill");
}

// The decode partials' workspace: one buffer per device that only grows, so its address stays
// fixed across steps and a captured graph (the model runner's full CUDA graphs) keeps writing to
// memory nobody else holds. It grows at most once per larger shape, outside any capture: the
// runner's warm-up launches come first. Steps on one device run in stream order, one at a time.
// A lock per device: growing waits for the device, whose queue may hold a collective that
// another tensor-parallel rank launches only after it gets here (gpu_runtime.h, kMaxGpuDevices).
float* decode_workspace(Device device, int64_t floats) {
  const size_t slot = device_slot(device.index);
  static std::mutex mutexes[kMaxGpuDevices];
  // (A std::map of Tensors here crashes clang 15 compiling HIP.)
  static std::vector<Tensor> buffers(kMaxGpuDevices);
  std::lock_guard lock(mutexes[slot]);
  Tensor& buffer = buffers[slot];
  if (!buffer.defined() || buffer.numel() < floats) {
    if (buffer.defined()) backend(device).synchronize(device.index);  // the old one may be in use
    buffer = Tensor::empty({floats}, DType::f32, device);
  }
  return buffer.data<float>();
}

// Splits keys into partitions when sequences x kv heads x head chunks would leave SMs idle.
int decode_partitions(int64_t blocks, int64_t max_seq_len, int sm_count) {
  const int64_t target = kDecodeBlocksPerSm * sm_count;
  if (blocks >= target || max_seq_len <= kMinPartitionKeys) return 1;
  int64_t partitions = std::min({ceil_div(target, blocks), ceil_div(max_seq_len, kMinPartitionKeys),
                                 static_cast<int64_t>(kMaxPartitions)});
  // The kernel rounds partition sizes up to whole tiles; drop partitions that would then be
  // empty for the longest sequence.
  const int64_t size = ceil_div(ceil_div(max_seq_len, partitions), kDecodeTile) * kDecodeTile;
  partitions = ceil_div(max_seq_len, size);
  return static_cast<int>(std::max<int64_t>(partitions, 1));
}

// $TESSERA_DECODE_ATTENTION: `auto` (unset: decode on tensor cores wherever that kernel fits)
// or `cuda_cores` (the CUDA-core kernel everywhere, so that bench/attention_lab can time and check
// both on one GPU). Read at each decode launch, on every path, so that a bad value is an error
// wherever decode runs; the lab switches it between calls. A captured graph keeps the kernel its
// capture launched.
bool tensor_core_decode_allowed() {
  const char* value = std::getenv("TESSERA_DECODE_ATTENTION");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) return true;
  TESSERA_REQUIRE(std::strcmp(value, "cuda_cores") == 0,
                  "TESSERA_DECODE_ATTENTION='{}' is not a decode kernel choice: use auto (the "
                  "default: tensor cores where they fit) or cuda_cores",
                  value);
  return false;
}

// Whether decode runs on tensor cores (attention_decode_mma.cuh): bf16/f16 with an exact head
// size, GQA groups of at most kDecodeMmaMaxGroup, sm_80+, unless $TESSERA_DECODE_ATTENTION says
// cuda_cores.
template <typename T, int kHeadSize, bool kExact>
bool decode_on_tensor_cores(int group, const Launch& launch) {
  const bool allowed = tensor_core_decode_allowed();  // checks the setting on every path
#if defined(TESSERA_GPU_HIP)
  (void)allowed;
  (void)group;
  (void)launch;
  return false;
#else
  if constexpr (kExact && kHasMmaAttention<T>) {
    return allowed && group <= kDecodeMmaMaxGroup &&
           device_limits(launch.device.index).compute_major >= 8;
  } else {
    (void)group;
    (void)launch;
    return false;
  }
#endif
}

#if !defined(TESSERA_GPU_HIP)
// The tensor-core decode kernel with kKvHeadsPerWarp kv heads per warp, laid out by `split`.
template <typename T, typename C, int kHeadSize, int kKvHeadsPerWarp>
void launch_decode_on_tensor_cores(const AttentionParams<T, C>& params, const Launch& launch,
                                   const DecodeSplit& split, dim3 grid) {
  const size_t warp_bytes =
      decode_mma_shared_bytes_per_warp<T, C, kHeadSize * kKvHeadsPerWarp>(split.tile_buffers);
  auto* kernel = decode_attention_mma_kernel<T, C, kHeadSize, kKvHeadsPerWarp>;
  reserve_shared_memory(reinterpret_cast<const void*>(kernel), warp_bytes * split.warps_per_block,
                        launch.device.index, params.head_size);
  launch_programmatic(kernel, grid, dim3(kDecodeMmaThreads * split.warps_per_block),
                      warp_bytes * split.warps_per_block, launch.stream, launch.device.index,
                      params, split);
  GPU_CHECK_LAUNCH("attention decode (tensor cores)");
}
#endif

template <typename T, typename C, int kHeadSize, bool kExact>
void launch_decode(const AttentionParams<T, C>& params, const Launch& launch) {
  const int group = params.num_heads / params.num_kv_heads;
  const bool tensor_cores = decode_on_tensor_cores<T, kHeadSize, kExact>(group, launch);
  TESSERA_CHECK(params.rope_cos_sin == nullptr || tensor_cores,
                "rotary attention reached a decode kernel that does not rotate");
  DecodeSplit split{};
  if (tensor_cores) {  // a warp takes the whole group
    split.head_chunks = 1;
    split.heads_per_block = group;
  } else {
    // A block's (head, column group) pairs fit its threads' accumulators.
    const int column_groups = round_up_to_4(params.head_size) / 4;
    const int max_heads = std::max(1, kMaxPairsPerBlock / column_groups);
    split.head_chunks = static_cast<int>(ceil_div(group, max_heads));
    split.heads_per_block = static_cast<int>(ceil_div(group, split.head_chunks));
  }
  // With an FP8 cache and heads of 64 a tensor-core warp takes two adjacent kv heads where both
  // groups fit its 16 rows (attention_mma_codes.cuh says why).
  int kv_heads_per_warp = 1;
#if !defined(TESSERA_GPU_HIP)
  if constexpr (!std::is_same_v<C, T> && kHeadSize == 64)
    if (tensor_cores && 2 * group <= kDecodeMmaMaxGroup && params.num_kv_heads % 2 == 0)
      kv_heads_per_warp = 2;
#endif
  const int64_t warp_kv_heads = params.num_kv_heads / kv_heads_per_warp;
  const int64_t blocks = launch.num_seqs * warp_kv_heads * split.head_chunks;
  split.num_partitions =
      decode_partitions(blocks, launch.max_seq_len, device_limits(launch.device.index).sm_count);
#if !defined(TESSERA_GPU_HIP)
  if constexpr (kExact && kHasMmaAttention<T>) {
    if (tensor_cores) {
      const DeviceLimits& limits = device_limits(launch.device.index);
      const DecodeLayout layout = choose_decode_layout(
          blocks, split.num_partitions,
          kv_heads_per_warp == 2 ? decode_mma_shared_bytes_per_warp<T, C, 2 * kHeadSize>(1)
                                 : decode_mma_shared_bytes_per_warp<T, C, kHeadSize>(1),
          limits.sm_count, limits.shared_bytes_optin);
      split.tile_buffers = layout.tile_buffers;
      split.warps_per_block = layout.warps_per_block;
      split.num_partitions = layout.block_partitions;
    }
  }
#endif

  if (split.num_partitions > 1) {
    const int64_t slots = launch.num_seqs * params.num_heads * split.num_partitions;
    const int64_t padded = round_up_to_4(params.head_size);
    split.partial_acc = decode_workspace(launch.device, slots * (padded + 2));
    split.partial_max = split.partial_acc + slots * padded;
    split.partial_sum = split.partial_max + slots;
  }

  const dim3 grid(static_cast<unsigned int>(warp_kv_heads * split.head_chunks),
                  static_cast<unsigned int>(launch.num_seqs),
                  static_cast<unsigned int>(split.num_partitions));
  if (tensor_cores) {
#if !defined(TESSERA_GPU_HIP)
    if constexpr (kExact && kHasMmaAttention<T>) {
      if constexpr (!std::is_same_v<C, T> && kHeadSize == 64) {
        if (kv_heads_per_warp == 2) {
          launch_decode_on_tensor_cores<T, C, kHeadSize, 2>(params, launch, split, grid);
        } else {
          launch_decode_on_tensor_cores<T, C, kHeadSize, 1>(params, launch, split, grid);
        }
      } else {
        launch_decode_on_tensor_cores<T, C, kHeadSize, 1>(params, launch, split, grid);
      }
    }
#endif
  } else {
    const size_t shared_bytes = decode_shared_bytes(params.head_size, split.heads_per_block);
    auto* kernel = decode_attention_kernel<T, C, kHeadSize, kExact>;
    reserve_shared_memory(reinterpret_cast<const void*>(kernel), shared_bytes, launch.device.index,
                          params.head_size);
    launch_programmatic(kernel, grid, dim3(kDecodeThreads), shared_bytes, launch.stream,
                        launch.device.index, params, split);
    GPU_CHECK_LAUNCH("attention decode");
  }
  if (split.num_partitions > 1) {
    const dim3 combine_grid(static_cast<unsigned int>(params.num_heads),
                            static_cast<unsigned int>(launch.num_seqs));
    launch_programmatic(combine_partitions_kernel<T, C>, combine_grid, dim3(kCombineThreads), 0,
                        launch.stream, launch.device.index, params, split);
    GPU_CHECK_LAUNCH("attention decode combine");
  }
}

template <typename T, typename C, int kHeadSize, bool kExact>
void launch_attention(const AttentionParams<T, C>& params, const Launch& launch) {
  if (launch.max_query_len == 1) {
    launch_decode<T, C, kHeadSize, kExact>(params, launch);
  } else {
    launch_prefill<T, C, kHeadSize, kExact>(params, launch);
  }
}

// ---- The kernel entry: checks, then the cache write and attention on the current stream.

void require_metadata_tensor(const Tensor& tensor, const char* name, int64_t values,
                             Device device) {
  TESSERA_REQUIRE(tensor.defined() && tensor.dtype() == DType::i32 && tensor.device() == device &&
                      tensor.is_contiguous() && tensor.numel() >= values,
                  "attention: metadata {} must be a contiguous i32 tensor of {} values on {} (the "
                  "model runner fills the device copies for GPU kernels); got {}",
                  name, values, device.str(), tensor.defined() ? tensor.str() : "undefined");
}

// The packed kernels move whole 16-byte packs of rows; other layouts take the generic one.
bool aligned_to_packs(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

// Rows of contiguous elements, aligned and a whole number of packs apart.
bool rows_in_packs(const Tensor& rows) {
  return aligned_to_packs(rows.data_ptr()) &&
         rows.stride(0) * static_cast<int64_t>(element_size(rows.dtype())) % 16 == 0;
}

// Whether a launch can take the packed (exact head size) kernels: the query rows, the output and
// the caches, and the step's key and value rows where the decode kernel reads them itself.
bool launch_in_packs(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& out,
                     const PagedKVCache& cache, bool reads_new_rows) {
  return rows_in_packs(query) && aligned_to_packs(out.data_ptr()) &&
         aligned_to_packs(cache.key.data_ptr()) && aligned_to_packs(cache.value.data_ptr()) &&
         (!reads_new_rows || (rows_in_packs(key) && rows_in_packs(value)));
}

// rotary_attention's rotation, for a decode on tensor cores (attention_rope.cuh).
struct Rope {
  const Tensor& positions;
  const Tensor& cos_sin_cache;
  bool is_neox;
};

// attend's kernel parameters and launches, for a cache of C.
template <typename T, typename C>
void launch_with_cache(const Tensor& query_rows, const Tensor& key_rows, const Tensor& value_rows,
                       const Tensor& out, const PagedKVCache& cache, const AttentionMetadata& meta,
                       const Launch& launch, const Attributes& attributes, const Rope* rope,
                       bool write_in_decode) {
  const int64_t head_size = attributes.get_int("head_size");
  AttentionParams<T, C> params{};
  TESSERA_CHECK(query_rows.dim() == 2 && query_rows.stride(1) == 1,
                "attention: the query {} must have contiguous rows", query_rows.str());
  params.query = static_cast<const T*>(query_rows.data_ptr());
  params.query_row_stride = query_rows.stride(0);
  params.new_key_row_stride = key_rows.stride(0);
  params.new_value_row_stride = value_rows.stride(0);
  params.key_cache = static_cast<C*>(cache.key.data_ptr());
  params.value_cache = static_cast<C*>(cache.value.data_ptr());
  if (write_in_decode) {
    params.new_key = static_cast<const T*>(key_rows.data_ptr());
    params.new_value = static_cast<const T*>(value_rows.data_ptr());
    params.slot_mapping = meta.device_slot_mapping.data<int32_t>();
    params.num_slots = cache.num_blocks() * cache.block_size();
  }
  params.out = static_cast<T*>(out.data_ptr());
  params.query_start_loc = meta.device_query_start_loc.data<int32_t>();
  params.seq_lens = meta.device_seq_lens.data<int32_t>();
  params.block_tables = meta.device_block_tables.data<int32_t>();
  params.num_heads = static_cast<int>(attributes.get_int("num_heads"));
  params.num_kv_heads = static_cast<int>(attributes.get_int("num_kv_heads"));
  params.head_size = static_cast<int>(head_size);
  params.block_size = static_cast<int>(cache.block_size());
  params.max_blocks_per_seq = static_cast<int>(meta.max_blocks_per_seq);
  constexpr double kLog2E = 1.4426950408889634;
  // The key scale multiplies every score (1 unless the cache is FP8).
  params.scale_log2 = static_cast<float>(attributes.get_float("scale") * cache.key_scale * kLog2E);
  params.value_scale = cache.value_scale;
  params.sliding_window =
      static_cast<int>(std::min<int64_t>(attributes.get_int("sliding_window", 0), INT32_MAX));
  params.softcap_log2 = static_cast<float>(attributes.get_float("logit_softcap", 0.0) * kLog2E);
  if (rope != nullptr) {
    params.rope_cos_sin = rope->cos_sin_cache.data<float>();
    params.rope_positions = rope->positions.data_ptr();
    params.rope_positions_i64 = rope->positions.dtype() == DType::i64;
    params.rope_max_position = rope->cos_sin_cache.size(0);
    params.rope_is_neox = rope->is_neox;
  }
  const bool aligned =
      launch_in_packs(query_rows, key_rows, value_rows, out, cache, write_in_decode);
  if (aligned && head_size == 64) {
    launch_attention<T, C, 64, true>(params, launch);
  } else if (aligned && head_size == 128) {
    launch_attention<T, C, 128, true>(params, launch);
  } else {
    launch_attention<T, C, kMaxHeadSize, false>(params, launch);
  }
}

// The attention op's work: query rows [tokens, Hq * D] and key / value rows [tokens, Hk * D],
// each with unit column stride and any row stride (rotary_attention passes the column slices of
// the qkv rows); with `rope`, the query and the step's key are rotated first, which only the
// tensor-core decode kernel does (the caller checks fused_rotary_decode_fits).
void attend(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& out,
            const Attributes& attributes, const Rope* rope) {
  ForwardContext& context = current_forward_context();
  TESSERA_CHECK(context.attention != nullptr, "the forward context has no attention metadata");
  const AttentionMetadata& meta = *context.attention;
  const int64_t layer = attributes.get_int("layer");
  TESSERA_CHECK(
      context.kv_caches && layer >= 0 && layer < static_cast<int64_t>(context.kv_caches->size()),
      "no KV cache for layer {}", layer);
  PagedKVCache& cache = (*context.kv_caches)[layer];
  const int64_t kv_heads = attributes.get_int("num_kv_heads");
  const int64_t head_size = attributes.get_int("head_size");
  const Device device = query.device();

  TESSERA_REQUIRE(head_size <= kMaxHeadSize,
                  "attention: head_size {} is past the {} kernels' limit of {}", head_size,
                  runtime_name(), kMaxHeadSize);
  TESSERA_REQUIRE(cache.key.defined() && cache.key.dim() == 4 && cache.key.size(2) == kv_heads &&
                      cache.key.size(3) == head_size && cache.value.defined() &&
                      cache.value.sizes() == cache.key.sizes(),
                  "attention: layer {}'s KV cache (key {}, value {}) must be two tensors of "
                  "[num_blocks, block_size, {}, {}]",
                  layer, cache.key.defined() ? cache.key.str() : "undefined",
                  cache.value.defined() ? cache.value.str() : "undefined", kv_heads, head_size);
  check_cache_dtype(cache, query.dtype(), layer);
  const bool float8 = cache.key.dtype() == DType::f8_e4m3;
  TESSERA_REQUIRE(cache.key.device() == device && cache.value.device() == device &&
                      key.device() == device && value.device() == device && out.device() == device,
                  "attention: query {}, key {}, value {}, output {} and layer {}'s KV cache {} "
                  "must be on one device",
                  query.str(), key.str(), value.str(), out.str(), layer, cache.key.str());
  TESSERA_REQUIRE(cache.key.is_contiguous() && cache.value.is_contiguous(),
                  "attention: layer {}'s KV cache {} must be contiguous", layer, cache.key.str());
  TESSERA_REQUIRE(meta.num_tokens <= query.size(0),
                  "attention: the step's metadata has {} tokens but the query only {}",
                  meta.num_tokens, query.size(0));
  // Rows past the step's tokens pad the batch up to a captured graph's size: they are neither
  // cached nor attended, and their output rows are left as they are.
  const int64_t tokens = meta.num_tokens;
  const Tensor query_rows = query.slice(0, 0, tokens), key_rows = key.slice(0, 0, tokens),
               value_rows = value.slice(0, 0, tokens);
  TESSERA_REQUIRE(meta.num_seqs <= kGridLimitYZ,
                  "attention: {} sequences in one step; the {} kernels take at most {}",
                  meta.num_seqs, runtime_name(), kGridLimitYZ);
  if (tokens == 0) return;
  require_metadata_tensor(meta.device_slot_mapping, "device_slot_mapping", tokens, device);

  LaunchScope scope(device);
  // A decode step's kernel writes the new K/V rows itself when they are plain [tokens, kv width]
  // rows; everything else writes the cache first.
  // (Every token must be some sequence's: the kernel writes each sequence's one token.)
  const bool decode = meta.max_query_len == 1 && meta.num_seqs > 0 && tokens <= meta.num_seqs;
  const bool write_in_decode = decode && !float8 && key_rows.dim() == 2 &&
                               key_rows.size(1) == kv_heads * head_size &&
                               key_rows.stride(1) == 1 && value_rows.sizes() == key_rows.sizes() &&
                               value_rows.stride(1) == 1;
  TESSERA_CHECK(rope == nullptr || write_in_decode,
                "rotary attention fused into a step that is not a decode of plain rows");
  if (!write_in_decode) {
    TESSERA_CHECK(key_rows.dim() == 2 && key_rows.stride(1) == 1 && value_rows.dim() == 2 &&
                      value_rows.stride(1) == 1 && value_rows.sizes() == key_rows.sizes(),
                  "attention: the cache write takes key and value rows of contiguous elements");
    reshape_and_cache(key_rows, value_rows, cache, meta.device_slot_mapping, scope.stream());
  }
  if (meta.num_seqs == 0) return;
  require_metadata_tensor(meta.device_query_start_loc, "device_query_start_loc", meta.num_seqs + 1,
                          device);
  require_metadata_tensor(meta.device_seq_lens, "device_seq_lens", meta.num_seqs, device);
  require_metadata_tensor(meta.device_block_tables, "device_block_tables",
                          meta.num_seqs * meta.max_blocks_per_seq, device);
  TESSERA_REQUIRE(meta.max_query_len >= 1,
                  "attention: the step's metadata has {} tokens but max_query_len {}", tokens,
                  meta.max_query_len);

  const Launch launch{meta.num_seqs, meta.max_query_len, meta.max_seq_len, device, scope.stream()};
  visit_device_float_dtype(kOp, query.dtype(), [&]<typename T>() {
    if (float8) {
      launch_with_cache<T, Float8E4M3>(query_rows, key_rows, value_rows, out, cache, meta, launch,
                                       attributes, rope, write_in_decode);
    } else {
      launch_with_cache<T, T>(query_rows, key_rows, value_rows, out, cache, meta, launch,
                              attributes, rope, write_in_decode);
    }
  });
}

void attention_gpu(const KernelArgs& args) {
  attend(args.inputs[0], args.inputs[1], args.inputs[2], args.outputs[0], args.attributes, nullptr);
}

// Whether rotary_attention's step can run as one tensor-core decode launch: a decode step of
// bf16/f16 rows with head size 64 or 128, aligned packs, a GQA group that fits, sm_80+, the
// rotation over the whole head with an f32 cos/sin cache and positions of the step's tokens.
bool fused_rotary_decode_fits(const KernelArgs& args, const QkvWidths& width) {
#if defined(TESSERA_GPU_HIP)
  (void)args;
  (void)width;
  return false;
#else
  const Tensor& positions = args.inputs[0];
  const Tensor& qkv = args.inputs[1];
  const Tensor& cos_sin_cache = args.inputs[2];
  const ForwardContext& context = current_forward_context();
  if (context.attention == nullptr) return false;
  const AttentionMetadata& meta = *context.attention;
  const bool decode = meta.max_query_len == 1 && meta.num_seqs > 0 &&
                      meta.num_tokens <= meta.num_seqs && meta.num_tokens <= qkv.size(0);
  const int64_t head_size = args.attributes.get_int("head_size");
  const int64_t heads = args.attributes.get_int("num_heads");
  const int64_t kv_heads = args.attributes.get_int("num_kv_heads");
  if (!decode || (head_size != 64 && head_size != 128) || heads % kv_heads != 0 ||
      heads / kv_heads > kDecodeMmaMaxGroup)
    return false;
  if (qkv.dtype() != DType::bf16 && qkv.dtype() != DType::f16) return false;
  // The packed kernel, as attend() chooses it for these rows.
  const int64_t layer = args.attributes.get_int("layer");
  if (!context.kv_caches || layer < 0 || layer >= static_cast<int64_t>(context.kv_caches->size()))
    return false;
  const PagedKVCache& cache = (*context.kv_caches)[static_cast<size_t>(layer)];
  // (An FP8 cache is written before the step, never by the decode kernel.)
  if (!cache.key.defined() || cache.key.dtype() != qkv.dtype()) return false;
  if (qkv.dim() != 2 || qkv.stride(1) != 1 || !cache.value.defined() ||
      !launch_in_packs(qkv.slice(1, 0, width.query),
                       qkv.slice(1, width.query, width.query + width.key),
                       qkv.slice(1, width.query + width.key, width.query + 2 * width.key),
                       args.outputs[0], cache, true))
    return false;
  if (cos_sin_cache.dtype() != DType::f32 || !cos_sin_cache.is_contiguous() ||
      cos_sin_cache.dim() != 2 || cos_sin_cache.size(1) != head_size ||
      cos_sin_cache.device() != qkv.device())
    return false;
  if ((positions.dtype() != DType::i32 && positions.dtype() != DType::i64) ||
      !positions.is_contiguous() || positions.dim() != 1 || positions.numel() < meta.num_tokens ||
      positions.device() != qkv.device())
    return false;
  if (!tensor_core_decode_allowed()) return false;
  return device_limits(qkv.device().index).compute_major >= 8;
#endif
}

// rotary_attention (compile/ops/rotary_attention.cpp) over the qkv rows' column slices, without
// copying them out: a decode step on tensor cores rotates inside the attention kernel (one
// launch); anything else rotates the query and key into outputs 1 and 2 with rotary_embedding's
// kernel and attends over them and the value's slice. Output 3 stays unwritten, as the op allows.
void rotary_attention_gpu(const KernelArgs& args) {
  const QkvWidths width = qkv_widths(args.attributes);
  const Tensor& qkv = args.inputs[1];
  TESSERA_REQUIRE(
      qkv.dim() == 2 && qkv.size(1) == width.query + 2 * width.key && qkv.stride(1) == 1,
      "rotary_attention: qkv {} must be rows of {} contiguous columns", qkv.str(),
      width.query + 2 * width.key);
  const Tensor query = qkv.slice(1, 0, width.query);
  const Tensor key = qkv.slice(1, width.query, width.query + width.key);
  const Tensor value = qkv.slice(1, width.query + width.key, width.query + 2 * width.key);
  const Attributes attributes = attention_attributes(args.attributes);
  if (fused_rotary_decode_fits(args, width)) {
    const Rope rope{args.inputs[0], args.inputs[2], args.attributes.get_bool("is_neox", true)};
    attend(query, key, value, args.outputs[0], attributes, &rope);
    return;
  }
  const Tensor rotary_inputs[] = {args.inputs[0], query, key, args.inputs[2]};
  const Attributes rotary_attributes = rotary_embedding_attributes(args.attributes);
  run_kernel("rotary_embedding", qkv.device().type,
             KernelArgs{rotary_inputs, rotary_attributes, args.outputs.subspan(1, 2)});
  attend(args.outputs[1], args.outputs[2], value, args.outputs[0], attributes, nullptr);
}

TESSERA_REGISTER_KERNEL("attention", kGpuDeviceType, attention_gpu);
TESSERA_REGISTER_KERNEL("rotary_attention", kGpuDeviceType, rotary_attention_gpu);

}  // namespace
}  // namespace tessera::gpu::attention
