// TESSERA_HOST_DEVICE marks a function that host code and GPU kernels both call: __host__
// __device__ under a GPU compiler (nvcc, or clang/hipcc compiling HIP), nothing elsewhere.
#pragma once

#if defined(__HIP__) || defined(__HIPCC__)
#include <hip/hip_runtime_api.h>  // __host__ and __device__ (nvcc predefines them)
#endif

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__)
#define TESSERA_HOST_DEVICE __host__ __device__
#else
#define TESSERA_HOST_DEVICE
#endif
