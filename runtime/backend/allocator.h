// Device memory allocation. Every byte of tensor memory goes through an Allocator so the runner
// can measure the activation peak and hand compiled code a static arena.
#pragma once

#include <cstddef>
#include <mutex>

namespace tessera {

struct MemoryStats {
  size_t current_bytes = 0;           // held by live tensors
  size_t peak_bytes = 0;              // maximum of current_bytes since the last reset_peak()
  size_t reserved_bytes = 0;          // taken from the device, including cached free blocks
  size_t num_device_allocations = 0;  // calls to the device's own allocator (cache misses)
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  MemoryStats stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard lock(mutex_);
    stats_.peak_bytes = stats_.current_bytes;
  }
  // Returns cached free blocks to the device; a no-op where nothing is cached.
  virtual void empty_cache() {}

 protected:
  // An allocator keeps stats_ (and whatever state of its own) under mutex_.
  mutable std::mutex mutex_;
  MemoryStats stats_;
};

}  // namespace tessera
