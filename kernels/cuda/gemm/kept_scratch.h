// Device scratch that outlives every step, for the GEMM paths that quantize x before their
// product (quantized_linear.cu's int8 rows, fp8_linear.cu's e4m3 codes and scales).
#pragma once

#include <cstdint>

#include "kernels/cuda/gpu_runtime.h"
#include "runtime/device.h"

namespace tessera::gpu {

// Scratch of at least `bytes` on `device` for `stream` and `use` (a text constant: the key is its
// address), kept for the process: a CUDA graph captured over a kernel that uses it replays into
// it, and memory freed during a capture would go back to the allocator while the graph still
// writes it. A larger request takes a new buffer and keeps the old one (a graph may hold it). One
// per stream, as two streams may run at once.
void* kept_scratch(Device device, gpuStream_t stream, int64_t bytes, const char* use);

}  // namespace tessera::gpu
