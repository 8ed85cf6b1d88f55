// fused_moe's first step and moe_routing's GPU kernel (kernels/cuda/experts/moe_routing.cu): each
// token's top_k experts and their weights, computed on the device as the CPU kernels compute
// them (kernels/cpu/fused_moe.cpp).
#pragma once

#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"
#include "runtime/tensor.h"

namespace tessera::gpu {

struct Routes {
  int32_t* ids;  // [T, top_k]
  float* weights;
};

// Routes router_logits [T, E] (any float dtype) into kept scratch on `stream`: softmax over every
// expert in f32, the top_k (the lowest index first among equals), renormalized when asked.
// Errors name `op` and the input.
Routes route(const char* op, const Tensor& logits, int64_t top_k, bool renormalize,
             gpuStream_t stream);

}  // namespace tessera::gpu
