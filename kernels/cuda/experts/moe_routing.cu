// moe_routing's GPU kernel and fused_moe's routing step (kernels/cuda/experts/moe_routing.h): a
// warp per token, with the CPU kernel's semantics (kernels/cpu/fused_moe.cpp).
#include "kernels/cuda/experts/moe_routing.h"

#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm/kept_scratch.h"
#include "kernels/cuda/programmatic_launch.cuh"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"

namespace tessera::gpu {
namespace {

constexpr int kRouteThreads = 128;

// Routes one token (its logits row) on one warp; lane `lane` writes ids and weights [top_k].
template <typename T>
__device__ void route_one(const T* row, int64_t experts, int top_k, bool renormalize, int lane,
                          int32_t* ids, float* weights) {
  float largest = -INFINITY;
  for (int64_t e = lane; e < experts; e += GPU_WARP_SIZE)
    largest = fmaxf(largest, to_compute(row[e]));
  largest = group_reduce<FloatMax, GPU_WARP_SIZE>(largest);
  float total = 0.0f;
  for (int64_t e = lane; e < experts; e += GPU_WARP_SIZE)
    total += expf(to_compute(row[e]) - largest);
  total = group_reduce<FloatSum, GPU_WARP_SIZE>(total);
  uint32_t chosen = 0;  // bit i: expert lane + W i is chosen
  float chosen_total = 0.0f;
  for (int k = 0; k < top_k; ++k) {
    float best_probability = -1.0f;
    int best = INT32_MAX;
    for (int e = lane, i = 0; e < experts; e += GPU_WARP_SIZE, ++i) {
      const float probability = expf(to_compute(row[e]) - largest) / total;
      // The first candidate, then a larger one: as on the CPU, also when the probabilities are
      // NaN (a NaN or infinite logit makes every one NaN; the lowest indices are chosen then).
      if (!(chosen >> i & 1) && (best == INT32_MAX || probability > best_probability)) {
        best_probability = probability;
        best = e;
      }
    }
#pragma unroll
    for (int mask = GPU_WARP_SIZE / 2; mask > 0; mask /= 2) {
      const float other_probability = GPU_SHFL_XOR(best_probability, mask);
      const int other = GPU_SHFL_XOR(best, mask);
      if (other != INT32_MAX && (best == INT32_MAX || other_probability > best_probability ||
                                 (!(other_probability < best_probability) && other < best))) {
        best_probability = other_probability;
        best = other;
      }
    }
    if (best < experts && best % GPU_WARP_SIZE == lane) chosen |= 1u << (best / GPU_WARP_SIZE);
    if (lane == 0) {
      ids[k] = best;
      weights[k] = best_probability;
    }
    chosen_total += best_probability;
  }
  if (renormalize && lane == 0)
    for (int k = 0; k < top_k; ++k) weights[k] /= chosen_total;
}

// A warp per token, as route_token on the CPU: lane l holds experts l, l + W, ... (W the warp
// width); the softmax's largest logit and sum, and each of the top_k rounds' choice (the largest
// probability not chosen yet, the lowest index first among equals), by warp reductions.
template <typename T>
__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const T* logits, int64_t tokens, int64_t experts, int top_k, bool renormalize,
                 int32_t* ids, float* weights) {
  wait_for_prior_grids();
  allow_next_grid();
  const int lane = static_cast<int>(threadIdx.x) % GPU_WARP_SIZE;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / GPU_WARP_SIZE;
  for (int64_t token =
           (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / GPU_WARP_SIZE;
       token < tokens; token += warps)  // the same on the whole warp
    route_one(logits + token * experts, experts, top_k, renormalize, lane, ids + token * top_k,
              weights + token * top_k);
}

// moe_routing's dense [T, E] weights from the routes.
__global__ void __launch_bounds__(kRouteThreads)
    scatter_routes_kernel(const int32_t* ids, const float* weights, int64_t tokens, int64_t experts,
                          int top_k, float* out) {
  wait_for_prior_grids();
  allow_next_grid();
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       index < tokens * experts; index += step) {
    const int64_t token = index / experts, expert = index % experts;
    float value = 0.0f;
    for (int k = 0; k < top_k; ++k)
      if (ids[token * top_k + k] == expert) value = weights[token * top_k + k];
    out[index] = value;
  }
}

void moe_routing_gpu(const KernelArgs& args) {
  const char* op = "moe_routing";
  const Tensor& logits = args.inputs[0];
  const Tensor& out = args.outputs[0];
  TESSERA_REQUIRE(out.dtype() == DType::f32 && out.sizes() == logits.sizes() &&
                      out.is_contiguous() && out.device() == logits.device(),
                  "{}: output {} must be f32 of router_logits' shape {}", op, out.str(),
                  logits.str());
  if (logits.numel() == 0) return;
  LaunchScope scope(logits.device());
  const int64_t top_k = args.attributes.get_int("top_k");
  const Routes routes =
      route(op, logits, top_k, args.attributes.get_bool("renormalize", false), scope.stream());
  launch_programmatic(scatter_routes_kernel, dim3(grid_size(logits.numel(), kRouteThreads)),
                      dim3(kRouteThreads), 0, scope.stream(), logits.device().index,
                      static_cast<const int32_t*>(routes.ids),
                      static_cast<const float*>(routes.weights), logits.size(0), logits.size(1),
                      static_cast<int>(top_k), out.data<float>());
  GPU_CHECK_LAUNCH(op);
}

TESSERA_REGISTER_KERNEL("moe_routing", kGpuDeviceType, moe_routing_gpu);

}  // namespace

Routes route(const char* op, const Tensor& logits, int64_t top_k, bool renormalize,
             gpuStream_t stream) {
  TESSERA_REQUIRE(logits.dim() == 2 && logits.is_contiguous(),
                  "{}: router_logits {} must be contiguous [tokens, experts]", op, logits.str());
  const int64_t tokens = logits.size(0), experts = logits.size(1);
  TESSERA_REQUIRE(top_k >= 1 && top_k <= experts,
                  "{}: top_k {} must be between 1 and the {} experts", op, top_k, experts);
  // A lane's chosen experts are the bits of one word.
  TESSERA_REQUIRE(experts <= 32 * GPU_WARP_SIZE,
                  "{}: router_logits {} route over more than the {} experts its GPU kernel takes",
                  op, logits.str(), 32 * GPU_WARP_SIZE);
  const int64_t pairs = tokens * top_k;
  TESSERA_REQUIRE(pairs <= INT32_MAX / 2, "{}: {} tokens of {} experts each are too many pairs", op,
                  tokens, top_k);
  ScratchLayout layout;
  const int64_t ids_at = layout.add<int32_t>(pairs), weights_at = layout.add<float>(pairs);
  auto* scratch =
      static_cast<char*>(kept_scratch(logits.device(), stream, layout.bytes(), "moe routes"));
  const Routes routes{reinterpret_cast<int32_t*>(scratch + ids_at),
                      reinterpret_cast<float*>(scratch + weights_at)};
  visit_device_float_dtype(op, logits.dtype(), [&]<typename T>() {
    launch_programmatic(route_kernel<T>, dim3(grid_size(tokens, kRouteThreads / GPU_WARP_SIZE)),
                        dim3(kRouteThreads), 0, stream, logits.device().index,
                        static_cast<const T*>(logits.data_ptr()), tokens, experts,
                        static_cast<int>(top_k), renormalize, routes.ids, routes.weights);
  });
  GPU_CHECK_LAUNCH(op);
  return routes;
}

}  // namespace tessera::gpu
