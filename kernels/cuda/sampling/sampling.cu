// The GPU "sample_tokens" kernel (contract in kernels/sampling.h): one block per row. The row is
// copied into the scratch row and penalized there; the top-k and top-p thresholds are found by
// building the threshold's order key bit by bit (32 counting or summing passes over the row, all
// in L2 for a 128k vocabulary) instead of sorting; the draw is a block-wide argmax of z + Gumbel
// noise from the same hash the CPU kernel uses. Only rows that ask for logprobs pay for them.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/kernel_checks.h"
#include "kernels/sampling.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / GPU_WARP_SIZE;
constexpr int kMaxTopLogprobs = 32;

// The block's combination of one value per thread; every thread gets the result.
template <typename T, typename Combine>
__device__ T block_all_reduce(T value, Combine combine, T* shared) {
  for (int offset = GPU_WARP_SIZE / 2; offset > 0; offset >>= 1)
    value = combine(value, GPU_SHFL_XOR(value, offset));
  __syncthreads();  // `shared` may still be read from the previous reduction
  if (threadIdx.x % GPU_WARP_SIZE == 0) shared[threadIdx.x / GPU_WARP_SIZE] = value;
  __syncthreads();
  T result = shared[0];
  for (int w = 1; w < kWarps; ++w) result = combine(result, shared[w]);
  return result;
}

struct MaxOf {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};
struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct Best {  // a candidate for an argmax: larger key wins, then the smaller index
  float key;
  int index;
};
__device__ Best better(Best a, Best b) {
  return (b.key > a.key || (b.key == a.key && b.index < a.index)) ? b : a;
}
__device__ Best block_argmax(Best value, Best* shared) {
  for (int offset = GPU_WARP_SIZE / 2; offset > 0; offset >>= 1) {
    Best other{GPU_SHFL_XOR(value.key, offset), GPU_SHFL_XOR(value.index, offset)};
    value = better(value, other);
  }
  __syncthreads();
  if (threadIdx.x % GPU_WARP_SIZE == 0) shared[threadIdx.x / GPU_WARP_SIZE] = value;
  __syncthreads();
  Best result = shared[0];
  for (int w = 1; w < kWarps; ++w) result = better(result, shared[w]);
  return result;
}

__device__ float float_of_order_key(uint32_t key) {
  uint32_t bits = (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key;
  return __uint_as_float(bits);
}

__global__ void __launch_bounds__(kThreads)
    sample_tokens_kernel(const float* __restrict__ logits_all, const float* __restrict__ params_all,
                         const int64_t* __restrict__ seeds_all, const int32_t* __restrict__ offsets,
                         const int32_t* __restrict__ entries, int64_t vocab, int width,
                         int32_t* __restrict__ token_ids, float* __restrict__ logprobs_all,
                         int32_t* __restrict__ top_ids_all, float* __restrict__ scratch_all) {
  __shared__ float shared_float[kWarps];
  __shared__ double shared_double[kWarps];
  __shared__ int shared_int[kWarps];
  __shared__ Best shared_best[kWarps];
  __shared__ int picked[kMaxTopLogprobs];
  const int64_t row = blockIdx.x;
  const float* logits = logits_all + row * vocab;
  const float* params = params_all + row * kNumSamplingParams;
  float* z = scratch_all + row * vocab;
  const MaxOf max_f;
  const Sum add_d, add_i;

  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) z[i] = logits[i];
  __syncthreads();
  for (int32_t e = offsets[row] + threadIdx.x; e < offsets[row + 1]; e += kThreads) {
    const int32_t token = entries[3 * e];  // one entry per token: no two threads share one
    z[token] = penalized_logit(z[token], entries[3 * e + 1], entries[3 * e + 2], params);
  }
  __syncthreads();

  Best best{-INFINITY, static_cast<int>(vocab)};
  if (params[kTemperature] == 0) {
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads)
      best = better(best, Best{z[i], static_cast<int>(i)});
  } else {
    const float inverse_temperature = static_cast<float>(1.0 / double{params[kTemperature]});
    float top = -INFINITY;
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      z[i] *= inverse_temperature;
      top = max_f(top, z[i]);
    }
    top = block_all_reduce(top, max_f, shared_float);  // also orders the writes above
    float threshold = -INFINITY;
    if (params[kMinP] > 0) threshold = top + static_cast<float>(log(double{params[kMinP]}));
    const int64_t top_k = static_cast<int64_t>(params[kTopK]);
    if (top_k > 0 && top_k < vocab) {  // the largest key with at least top_k values at or above
      uint32_t key = 0;
      for (int bit = 31; bit >= 0; --bit) {
        const uint32_t candidate = key | (1u << bit);
        int count = 0;
        for (int64_t i = threadIdx.x; i < vocab; i += kThreads)
          count += float_order_key(z[i]) >= candidate;
        if (block_all_reduce(count, add_i, shared_int) >= top_k) key = candidate;
      }
      threshold = fmaxf(threshold, float_of_order_key(key));
    }
    if (params[kTopP] < 1) {  // the largest key whose kept values at or above hold top_p
      double total = 0;
      for (int64_t i = threadIdx.x; i < vocab; i += kThreads)
        if (z[i] >= threshold) total += exp(double{z[i]} - top);
      total = block_all_reduce(total, add_d, shared_double);
      const double goal = double{params[kTopP]} * total;
      uint32_t key = 0;
      for (int bit = 31; bit >= 0; --bit) {
        const uint32_t candidate = key | (1u << bit);
        double mass = 0;
        for (int64_t i = threadIdx.x; i < vocab; i += kThreads)
          if (z[i] >= threshold && float_order_key(z[i]) >= candidate)
            mass += exp(double{z[i]} - top);
        if (block_all_reduce(mass, add_d, shared_double) >= goal) key = candidate;
      }
      threshold = fmaxf(threshold, float_of_order_key(key));
    }
    const uint64_t row_key =
        sampling_row_key(static_cast<uint64_t>(seeds_all[2 * row]), seeds_all[2 * row + 1]);
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      if (!(z[i] >= threshold)) continue;
      best = better(best, Best{z[i] + sampling_gumbel(row_key, i), static_cast<int>(i)});
    }
  }
  const int chosen = block_argmax(best, shared_best).index;
  if (threadIdx.x == 0) token_ids[row] = chosen;

  const int asked = static_cast<int>(params[kNumLogprobs]);
  if (asked < 0) return;
  float top = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) top = max_f(top, logits[i]);
  top = block_all_reduce(top, max_f, shared_float);
  double sum = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) sum += exp(double{logits[i]} - top);
  const double log_total = top + log(block_all_reduce(sum, add_d, shared_double));
  float* logprobs = logprobs_all + row * (width + 1);
  int32_t* top_ids = top_ids_all + row * width;
  if (threadIdx.x == 0) logprobs[0] = static_cast<float>(logits[chosen] - log_total);
  int n = asked < width ? asked : width;
  if (n > vocab) n = static_cast<int>(vocab);
  for (int k = 0; k < n; ++k) {  // the k-th most likely: the best not picked yet
    Best candidate{-INFINITY, static_cast<int>(vocab)};
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      bool taken = false;
      for (int j = 0; j < k; ++j) taken |= picked[j] == i;
      if (!taken) candidate = better(candidate, Best{logits[i], static_cast<int>(i)});
    }
    candidate = block_argmax(candidate, shared_best);
    if (threadIdx.x == 0) {
      picked[k] = candidate.index;
      top_ids[k] = candidate.index;
      logprobs[1 + k] = static_cast<float>(logits[candidate.index] - log_total);
    }
    __syncthreads();
  }
}

void sample_tokens_entry(const KernelArgs& args) {
  const Tensor& logits = args.inputs[0];
  const int64_t rows = logits.size(0);
  const int64_t vocab = logits.size(1);
  TESSERA_CHECK(logits.dtype() == DType::f32 && logits.is_contiguous(),
                "sample_tokens: logits must be contiguous f32");
  TESSERA_REQUIRE(vocab < (int64_t{1} << 31), "sample_tokens: a vocabulary of {} is too large",
                  vocab);
  const int width = static_cast<int>(args.outputs[2].size(1));
  TESSERA_CHECK(width <= kMaxTopLogprobs, "sample_tokens: at most {} top logprobs",
                kMaxTopLogprobs);
  if (rows == 0) return;
  LaunchScope scope(logits.device());
  sample_tokens_kernel<<<static_cast<unsigned>(rows), kThreads, 0, scope.stream()>>>(
      static_cast<const float*>(logits.data_ptr()),
      static_cast<const float*>(args.inputs[1].data_ptr()),
      static_cast<const int64_t*>(args.inputs[2].data_ptr()),
      static_cast<const int32_t*>(args.inputs[3].data_ptr()),
      static_cast<const int32_t*>(args.inputs[4].data_ptr()), vocab, width,
      static_cast<int32_t*>(args.outputs[0].data_ptr()),
      static_cast<float*>(args.outputs[1].data_ptr()),
      static_cast<int32_t*>(args.outputs[2].data_ptr()),
      static_cast<float*>(args.outputs[3].data_ptr()));
  GPU_CHECK_LAUNCH("sample_tokens");
}

template <typename Id>
__global__ void take_sampled_ids_kernel(const Id* sampled, int64_t count, const int32_t* tokens,
                                        int32_t* out, int64_t size) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < size) out[i] = take_sampled_id(tokens[i], sampled, count);
}

void take_sampled_ids_entry(const KernelArgs& args) {
  const Tensor& sampled = args.inputs[0];
  const Tensor& tokens = args.inputs[1];
  Tensor& out = args.outputs[0];
  check_take_sampled_ids(sampled, tokens, out);
  const int64_t size = tokens.numel();
  if (size == 0) return;
  constexpr int kBlock = 256;
  const auto blocks = static_cast<unsigned>((size + kBlock - 1) / kBlock);
  LaunchScope scope(tokens.device());
  const auto* in = static_cast<const int32_t*>(tokens.data_ptr());
  auto* result = static_cast<int32_t*>(out.data_ptr());
  if (sampled.dtype() == DType::i64)
    take_sampled_ids_kernel<<<blocks, kBlock, 0, scope.stream()>>>(
        static_cast<const int64_t*>(sampled.data_ptr()), sampled.numel(), in, result, size);
  else
    take_sampled_ids_kernel<<<blocks, kBlock, 0, scope.stream()>>>(
        static_cast<const int32_t*>(sampled.data_ptr()), sampled.numel(), in, result, size);
  GPU_CHECK_LAUNCH("take_sampled_ids");
}

// One thread per (row, token): a forbidden token's logit becomes -inf.
__global__ void apply_token_mask_kernel(const uint32_t* masks, const int32_t* rows, int64_t count,
                                        int64_t words, float* logits, int64_t vocab) {
  const int64_t token = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (token >= vocab) return;
  const uint32_t word = masks[static_cast<int64_t>(rows[count + blockIdx.y]) * words + token / 32];
  if (!((word >> (token % 32)) & 1u))
    logits[static_cast<int64_t>(rows[blockIdx.y]) * vocab + token] = -INFINITY;
}

void apply_token_mask_entry(const KernelArgs& args) {
  const Tensor& masks = args.inputs[0];
  const Tensor& rows = args.inputs[1];
  Tensor& logits = args.outputs[0];
  check_apply_token_mask(masks, rows, logits);
  const int64_t count = rows.size(1), vocab = logits.size(1);
  if (count == 0 || vocab == 0) return;
  TESSERA_REQUIRE(count < 65536, "apply_token_mask: {} masked rows, at most 65535", count);
  constexpr int kBlock = 256;
  const dim3 grid(static_cast<unsigned>((vocab + kBlock - 1) / kBlock),
                  static_cast<unsigned>(count));
  LaunchScope scope(logits.device());
  apply_token_mask_kernel<<<grid, kBlock, 0, scope.stream()>>>(
      static_cast<const uint32_t*>(masks.data_ptr()), static_cast<const int32_t*>(rows.data_ptr()),
      count, masks.size(1), static_cast<float*>(logits.data_ptr()), vocab);
  GPU_CHECK_LAUNCH("apply_token_mask");
}

}  // namespace

TESSERA_REGISTER_KERNEL("sample_tokens", kGpuDeviceType, sample_tokens_entry);
TESSERA_REGISTER_KERNEL("take_sampled_ids", kGpuDeviceType, take_sampled_ids_entry);
TESSERA_REGISTER_KERNEL("apply_token_mask", kGpuDeviceType, apply_token_mask_entry);

}  // namespace tessera::gpu
