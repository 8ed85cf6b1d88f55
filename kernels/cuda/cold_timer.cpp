#include "kernels/cuda/cold_timer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/backend.h"
#include "kernels/check.h"
#include "kernels/cuda/gpu_runtime.h"

namespace tessera::gpu {
namespace {

// Owns the events of one timing.
class TimingEvents {
 public:
  explicit TimingEvents(size_t count) : events_(count, nullptr) {
    for (gpuEvent_t& event : events_) GPU_CHECK(gpuEventCreate(&event));
  }
  ~TimingEvents() {
    for (gpuEvent_t event : events_)
      if (event != nullptr) (void)gpuEventDestroy(event);
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
  gpuEvent_t operator[](size_t i) const { return events_[i]; }

 private:
  std::vector<gpuEvent_t> events_;
};

// The median of the timed runs between events[2 * run] and events[2 * run + 1].
float median_of_runs(const TimingEvents& events, int runs) {
  GPU_CHECK(gpuEventSynchronize(events[2 * runs - 1]));
  std::vector<float> ms(static_cast<size_t>(runs));
  for (int run = 0; run < runs; ++run)
    GPU_CHECK(gpuEventElapsedTime(&ms[run], events[2 * run], events[2 * run + 1]));
  std::nth_element(ms.begin(), ms.begin() + runs / 2, ms.end());
  return ms[runs / 2];
}

constexpr int kRuns = 7;

// The measuring streams, one per device, and the lock that gives one thread at a time the use of
// them (a capture on a stream takes whatever else is launched onto it).
std::mutex& measuring_mutex() {
  static auto* mutex = new std::mutex();  // lives until exit: modules unload late
  return *mutex;
}

// Streams by device index, each created on first use and kept until exit (raw pointers: a map of
// unique_ptr<Stream> crashes Debian's hipcc 5.2 compiler, clang 15, in its device pass).
Stream& measuring_stream(Device device) {
  static auto* streams = new std::map<int, Stream*>();  // under measuring_mutex
  Stream*& stream = (*streams)[device.index];
  if (stream == nullptr) stream = backend(device).create_stream(device.index).release();
  return *stream;
}

// Waits for `stream` where an error is already on its way out: a second error would hide it.
void synchronize_quietly(Stream& stream) noexcept {
  try {
    stream.synchronize();
  } catch (...) {
  }
}

}  // namespace

ColdTimer::ColdTimer(Device device)
    : device_(device),
      flush_bytes_(2 * std::max<size_t>(device_limits(device.index).l2_bytes, 1 << 20)) {
  // What the caller queued may still read memory that the runs below write (the outputs, the
  // flush buffer, a cached block freed since): it finishes first.
  backend(device).current_stream(device.index).synchronize();
  flush_ = backend(device).allocator(device.index).allocate(flush_bytes_);
}

ColdTimer::~ColdTimer() {
  backend(device_).allocator(device_.index).deallocate(flush_, flush_bytes_);
}

float ColdTimer::median_ms(gpuStream_t stream, const std::function<void()>& launch) {
  launch();
  TimingEvents events(2 * kRuns);
  for (int run = 0; run < kRuns; ++run) {
    GPU_CHECK(gpuMemsetAsync(flush_, run, flush_bytes_, stream));
    GPU_CHECK(gpuEventRecord(events[2 * run], stream));
    launch();
    GPU_CHECK(gpuEventRecord(events[2 * run + 1], stream));
  }
  return median_of_runs(events, kRuns);
}

float ColdTimer::median_graph_ms(const std::function<void()>& launch) {
  DeviceBackend& gpu = backend(device_);
  // The caller's stream is idle (the constructor waited for it, and the caller queues nothing
  // while it times), so the measuring stream needs no ordering against it.
  std::lock_guard<std::mutex> lock(measuring_mutex());
  Stream& stream = measuring_stream(device_);
  StreamGuard current(stream);
  try {
    launch();  // outside the capture: whatever measures or allocates on first use does it here
    gpu.begin_capture(stream);
    try {
      launch();
    } catch (...) {
      try {
        (void)gpu.end_capture(stream);
      } catch (...) {  // the launch's error is the one to report
      }
      throw;
    }
    std::unique_ptr<GraphExec> graph = gpu.end_capture(stream);
    const auto native = static_cast<gpuStream_t>(stream.native_handle());
    graph->replay(stream);
    TimingEvents events(2 * kRuns);
    for (int run = 0; run < kRuns; ++run) {
      GPU_CHECK(gpuMemsetAsync(flush_, run, flush_bytes_, native));
      GPU_CHECK(gpuEventRecord(events[2 * run], native));
      graph->replay(stream);
      GPU_CHECK(gpuEventRecord(events[2 * run + 1], native));
    }
    const float ms = median_of_runs(events, kRuns);
    stream.synchronize();  // the outputs are the caller's again, the flush buffer can go
    return ms;
  } catch (...) {
    synchronize_quietly(stream);  // nothing may still write the flush buffer when it is freed
    throw;
  }
}

}  // namespace tessera::gpu
