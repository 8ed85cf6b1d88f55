// Readbacks to pinned host memory (DeviceBackend::start_readback): a copy behind the stream's
// queued work and an event after it, so the host waits on the event, not on the stream, and work
// queued later keeps the device busy meanwhile. Uploads (DeviceBackend::upload) the other way:
// the host's bytes into a pinned buffer, the copy queued with an event after it, and the buffer
// back in the pool once the event has passed. Pinned buffers are pooled per device: allocating
// pinned memory costs far more than a decode step's copy of its ids.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

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

class PinnedUploads {
 public:
  explicit PinnedUploads(PinnedReadbackPool& pool) : pool_(pool) {}
  PinnedUploads(const PinnedUploads&) = delete;
  PinnedUploads& operator=(const PinnedUploads&) = delete;
  ~PinnedUploads();

  // Copies `bytes` from host memory at `src` to device memory at `dst` on `stream`; returns
  // without waiting for the device.
  void upload(int device_index, void* dst, const void* src, size_t bytes, gpuStream_t stream);

 private:
  struct InFlight {
    void* buffer;
    size_t capacity;
    gpuEvent_t landed;
  };
  // Gives the buffers of copies that have landed back to the pool; the caller holds mutex_.
  void reap();

  PinnedReadbackPool& pool_;
  std::mutex mutex_;
  std::vector<InFlight> in_flight_;
};

}  // namespace tessera::gpu
