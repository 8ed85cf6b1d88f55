// Readbacks to pinned host memory (DeviceBackend::start_readback): a copy behind the stream's
// queued work and an event after it, so the host waits on the event, not on the stream, and work
// queued later keeps the device busy meanwhile. Pinned buffers are pooled per device: allocating
// pinned memory costs far more than a decode step's copy of its ids.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cuda/gpu_vendor.h"
#include "runtime/backend/backend.h"

namespace tessera::gpu {

class PinnedReadbackPool {
 public:
  PinnedReadbackPool() = default;
  PinnedReadbackPool(const PinnedReadbackPool&) = delete;
  PinnedReadbackPool& operator=(const PinnedReadbackPool&) = delete;

  // Copies `bytes` from device memory at `src` (device `device_index`) on `stream`.
  std::unique_ptr<HostReadback> start(int device_index, const void* src, size_t bytes,
                                      gpuStream_t stream);

  // For the readbacks: a free buffer of `capacity` bytes, or null; and one given back.
  void* take(size_t capacity);
  void give_back(size_t capacity, void* buffer);

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_buffers_;  // by size
};

}  // namespace tessera::gpu
