// The device and launch halves of programmatic dependent launch
// (runtime/backend/programmatic_launch.h).
#pragma once

#include <utility>

#include "kernels/cuda/gpu_runtime.h"

namespace tessera::gpu {

// Waits until the grids before this one on the stream have finished and their writes are
// visible. A kernel calls it before its first read of anything an earlier kernel wrote and before
// its first write; loads of constants (weights) may come first. A no-op when not launched
// programmatically.
__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(TESSERA_GPU_HIP)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next programmatically launched kernel be scheduled now (it still waits for this grid
// to finish before it reads anything).
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(TESSERA_GPU_HIP)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, shared, stream>>>(arguments...), launched programmatically when
// use_programmatic_launch(device). Only for kernels that call wait_for_prior_grids() first.
template <typename... Parameters, typename... Arguments>
void launch_programmatic(void (*kernel)(Parameters...), dim3 grid, dim3 block, size_t shared,
                         gpuStream_t stream, int device, Arguments&&... arguments) {
#if !defined(TESSERA_GPU_HIP)
  if (use_programmatic_launch(device)) {
    cudaLaunchAttribute attribute;
    const cudaLaunchConfig_t config =
        programmatic_launch_config(grid, block, shared, stream, attribute);
    GPU_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Arguments>(arguments)...));
    return;
  }
#else
  (void)device;
#endif
  kernel<<<grid, block, shared, stream>>>(std::forward<Arguments>(arguments)...);
}

}  // namespace tessera::gpu
