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

// Carves consecutive arrays out of one kept scratch buffer, each 256-byte aligned.
class ScratchLayout {
 public:
  template <typename V>
  int64_t add(int64_t count) {
    const int64_t offset = bytes_;
    bytes_ += (count * static_cast<int64_t>(sizeof(V)) + 255) / 256 * 256;
    return offset;
  }
  int64_t bytes() const { return bytes_; }

 private:
  int64_t bytes_ = 0;
};

}  // namespace tessera::gpu
