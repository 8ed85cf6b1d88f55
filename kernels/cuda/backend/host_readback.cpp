// Readbacks to pinned host memory: see host_readback.h.
#include "kernels/cuda/backend/host_readback.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/backend/stream_gates.h"
#include "kernels/cuda/gpu_runtime.h"

namespace tessera::gpu {
namespace {

class GpuHostReadback final : public HostReadback {
 public:
  GpuHostReadback(PinnedReadbackPool& pool, int device_index, const void* src, size_t bytes,
                  gpuStream_t stream)
      : pool_(pool) {
    // Whole pages, so that buffers of nearby sizes are reused for each other.
    capacity_ = std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096);
    buffer_ = pool_.take(capacity_);
    DeviceGuard device(device_index);
    try {
      if (buffer_ == nullptr) GPU_CHECK(gpuHostMalloc(&buffer_, capacity_));
      GPU_CHECK(gpuEventCreate(&event_));
      if (bytes > 0) GPU_CHECK(gpuMemcpyAsync(buffer_, src, bytes, gpuMemcpyDeviceToHost, stream));
      GPU_CHECK(gpuEventRecord(event_, stream));
    } catch (...) {
      // No destructor runs for a constructor that throws: give back what it holds.
      if (event_ != nullptr && gpuEventDestroy(event_) != gpuSuccess) (void)gpuGetLastError();
      if (buffer_ != nullptr) pool_.give_back(capacity_, buffer_);
      throw;
    }
  }
  ~GpuHostReadback() override {
    // The copy may still be in flight: the buffer goes back only once it has landed (an error
    // from a faulted device is dropped here; wait() is where it is reported).
    if (!waited_) {
      stream_gates().open_all();  // a profiler's gate would hold the copy until its timeout
      if (gpuEventSynchronize(event_) != gpuSuccess) (void)gpuGetLastError();
    }
    if (gpuEventDestroy(event_) != gpuSuccess) (void)gpuGetLastError();
    pool_.give_back(capacity_, buffer_);
  }
  const void* wait() override {
    if (!waited_) {
      stream_gates().open_all();
      GPU_CHECK(gpuEventSynchronize(event_));
      waited_ = true;
    }
    return buffer_;
  }

 private:
  PinnedReadbackPool& pool_;
  size_t capacity_ = 0;
  void* buffer_ = nullptr;
  gpuEvent_t event_ = nullptr;
  bool waited_ = false;
};

}  // namespace

std::unique_ptr<HostReadback> PinnedReadbackPool::start(int device_index, const void* src,
                                                        size_t bytes, gpuStream_t stream) {
  stream_gates().open_all();  // a gate would hold the copy back until its timeout
  return std::make_unique<GpuHostReadback>(*this, device_index, src, bytes, stream);
}

void* PinnedReadbackPool::take(size_t capacity) {
  std::lock_guard lock(mutex_);
  auto found = free_buffers_.find(capacity);
  if (found == free_buffers_.end()) return nullptr;
  void* buffer = found->second;
  free_buffers_.erase(found);
  return buffer;
}

void PinnedReadbackPool::give_back(size_t capacity, void* buffer) {
  std::lock_guard lock(mutex_);
  free_buffers_.emplace(capacity, buffer);
}

void PinnedUploads::reap() {
  std::erase_if(in_flight_, [&](const InFlight& upload) {
    const gpuError_t status = gpuEventQuery(upload.landed);
    if (status == gpuErrorNotReady) {
      (void)gpuGetLastError();
      return false;
    }
    if (status != gpuSuccess) (void)gpuGetLastError();  // a faulted device: reported elsewhere
    if (gpuEventDestroy(upload.landed) != gpuSuccess) (void)gpuGetLastError();
    pool_.give_back(upload.capacity, upload.buffer);
    return true;
  });
}

void PinnedUploads::upload(int device_index, void* dst, const void* src, size_t bytes,
                           gpuStream_t stream) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  reap();
  const size_t capacity = std::max<size_t>(4096, (bytes + 4095) / 4096 * 4096);
  void* buffer = pool_.take(capacity);
  gpuEvent_t landed = nullptr;
  DeviceGuard device(device_index);
  try {
    if (buffer == nullptr) GPU_CHECK(gpuHostMalloc(&buffer, capacity));
    std::memcpy(buffer, src, bytes);
    GPU_CHECK(gpuEventCreate(&landed));
    GPU_CHECK(gpuMemcpyAsync(dst, buffer, bytes, gpuMemcpyHostToDevice, stream));
    GPU_CHECK(gpuEventRecord(landed, stream));
  } catch (...) {
    // The copy may have been queued: wait for the stream before the buffer is reused.
    if (gpuStreamSynchronize(stream) != gpuSuccess) (void)gpuGetLastError();
    if (landed != nullptr && gpuEventDestroy(landed) != gpuSuccess) (void)gpuGetLastError();
    if (buffer != nullptr) pool_.give_back(capacity, buffer);
    throw;
  }
  in_flight_.push_back({buffer, capacity, landed});
}

PinnedUploads::~PinnedUploads() {
  for (const InFlight& upload : in_flight_) {
    if (gpuEventSynchronize(upload.landed) != gpuSuccess) (void)gpuGetLastError();
    if (gpuEventDestroy(upload.landed) != gpuSuccess) (void)gpuGetLastError();
    pool_.give_back(upload.capacity, upload.buffer);
  }
}

}  // namespace tessera::gpu
