// The CPU backend: aligned host memory with byte accounting; streams are synchronous and graph
// capture is not supported (the compiled CPU code is already a single call per piece).
#include <malloc.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "runtime/backend/backend.h"
#include "runtime/check.h"

namespace tessera {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, rounded);
    if (ptr == nullptr) throw Error(fmt::format("out of host memory allocating {} bytes", bytes));
    std::lock_guard lock(mutex_);
    stats_.current_bytes += bytes;
    stats_.reserved_bytes += bytes;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.current_bytes);
    ++stats_.num_device_allocations;
    return ptr;
  }
  void deallocate(void* ptr, size_t bytes) override {
    std::free(ptr);
    std::lock_guard lock(mutex_);
    stats_.current_bytes -= bytes;
    stats_.reserved_bytes -= bytes;
  }

 private:
  static constexpr size_t kAlignment = 64;
};

class CpuStream final : public Stream {
 public:
  Device device() const override { return kCPU; }
  void synchronize() override {}
  void* native_handle() const override { return nullptr; }
};

class CpuEvent final : public Event {
 public:
  void record(Stream&) override { time_ = std::chrono::steady_clock::now(); }
  void synchronize() override {}
  float elapsed_ms(const Event& end) const override {
    const auto& other = dynamic_cast<const CpuEvent&>(end);
    return std::chrono::duration<float, std::milli>(other.time_ - time_).count();
  }

 private:
  std::chrono::steady_clock::time_point time_{};
};

class CpuBackend final : public DeviceBackend {
 public:
  DeviceType type() const override { return DeviceType::cpu; }
  int device_count() const override { return 1; }
  std::string architecture(int) const override { return ""; }
  std::string device_name(int) const override {
    return fmt::format("host CPU ({} threads)", std::thread::hardware_concurrency());
  }
  Allocator& allocator(int) override { return allocator_; }
  std::unique_ptr<Stream> create_stream(int) override { return std::make_unique<CpuStream>(); }
  Stream& current_stream(int) override { return current_ ? *current_ : default_stream_; }
  void set_current_stream(int, Stream* stream) override { current_ = stream; }
  std::unique_ptr<Event> create_event(int) override { return std::make_unique<CpuEvent>(); }
  void synchronize(int) override {}
  void copy(void* dst, Device, const void* src, Device, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  bool supports_graphs() const override { return false; }
  void begin_capture(Stream&) override {
    throw Error("graph capture is not supported on the CPU; use cudagraph_mode=none");
  }
  std::unique_ptr<GraphExec> end_capture(Stream&) override {
    throw Error("graph capture is not supported on the CPU; use cudagraph_mode=none");
  }
  std::pair<size_t, size_t> memory_info(int) const override {
    long pages = sysconf(_SC_PHYS_PAGES);
    long available = sysconf(_SC_AVPHYS_PAGES);
    long page = sysconf(_SC_PAGE_SIZE);
    return {static_cast<size_t>(pages) * page, static_cast<size_t>(available) * page};
  }

 private:
  CpuAllocator allocator_;
  CpuStream default_stream_;
  static thread_local Stream* current_;
};

thread_local Stream* CpuBackend::current_ = nullptr;

[[maybe_unused]] const bool registered = [] {
  // Keep freed host memory in the process: every step allocates and frees the same large buffers
  // (logits rows, staging), and glibc would otherwise unmap them and fault every page in again
  // next step (docs/performance.md "Host memory kept in the process").
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  register_backend(std::make_unique<CpuBackend>());
  return true;
}();

}  // namespace
}  // namespace tessera
