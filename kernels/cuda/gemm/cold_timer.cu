#include "kernels/cuda/gemm/cold_timer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cuda/backend/profiled_replay.h"
#include "kernels/cuda/gpu_runtime.h"
#include "kernels/cuda/programmatic_launch.cuh"
#include "runtime/backend/backend.h"
#include "runtime/check.h"

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

// The kernel a timed graph launch follows, standing in for the short kernel (a norm, an
// activation) that precedes a GEMM in a decode step: one block that lets the next grid start, then
// spins for about 1.5 us. A launch made programmatically can load its weights meanwhile; one that
// is not (a library GEMM) starts after it. Its own time is measured and taken off.
constexpr long long kLeadCycles = 3000;

__global__ void lead_kernel(long long cycles) {
  wait_for_prior_grids();
  allow_next_grid();
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Evicts L2 by reading a buffer twice its size: the lines left behind are clean, as in a decode
// step (where the kernels before read weights), so evicting them costs the timed launch nothing.
// (A memset would leave dirty lines, whose write-back the timed launch would pay for.)
constexpr int kFlushThreads = 256;

__global__ void __launch_bounds__(kFlushThreads)
    flush_kernel(const uint4* buffer, int64_t packs, unsigned int* sink) {
  unsigned int folded = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kFlushThreads + threadIdx.x; i < packs;
       i += static_cast<int64_t>(gridDim.x) * kFlushThreads) {
    const uint4 pack = buffer[i];
    folded ^= pack.x ^ pack.y ^ pack.z ^ pack.w;
  }
  if (folded == 0xdeadbeefu) *sink = folded;  // keeps the loads; the buffer is zeros
}

void launch_lead(gpuStream_t stream, int device) {
  launch_programmatic(lead_kernel, dim3(1), dim3(GPU_WARP_SIZE), 0, stream, device, kLeadCycles);
  GPU_CHECK_LAUNCH("cold timer lead kernel");
}

// The measuring streams by device index, each created on first use under its device's
// ColdTimer::measuring_mutex and kept until exit.
Stream& measuring_stream(Device device) {
  static Stream* streams[kMaxGpuDevices] = {};
  Stream*& stream = streams[device_slot(device.index)];
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
  // Zeros, and a last word past the packs for the flush kernel's never-taken store.
  try {
    const gpuStream_t stream =
        static_cast<gpuStream_t>(backend(device).current_stream(device.index).native_handle());
    GPU_CHECK(gpuMemsetAsync(flush_, 0, flush_bytes_, stream));
    GPU_CHECK(gpuStreamSynchronize(stream));
  } catch (...) {
    backend(device).allocator(device.index).deallocate(flush_, flush_bytes_);
    throw;
  }
}

std::recursive_mutex& ColdTimer::measuring_mutex(int device) {
  // Live until exit: modules unload late.
  static auto* mutexes = new std::recursive_mutex[kMaxGpuDevices];
  return mutexes[device_slot(device)];
}

void ColdTimer::flush(gpuStream_t stream) {
  const int64_t packs = static_cast<int64_t>(flush_bytes_ / sizeof(uint4)) - 1;
  const int blocks = 4 * device_limits(device_.index).sm_count;
  flush_kernel<<<blocks, kFlushThreads, 0, stream>>>(
      static_cast<const uint4*>(flush_), packs,
      reinterpret_cast<unsigned int*>(static_cast<uint4*>(flush_) + packs));
  GPU_CHECK_LAUNCH("cold timer L2 flush");
}

ColdTimer::~ColdTimer() {
  backend(device_).allocator(device_.index).deallocate(flush_, flush_bytes_);
}

float ColdTimer::median_graph_ms(const std::function<void()>& launch, TimedAfter after) {
  if (after == TimedAfter::nothing) return median_replay_ms(launch, after);
  // The lead kernel alone, timed the same way once per timer, is taken off every result.
  if (lead_ms_ < 0.0f) lead_ms_ = median_replay_ms([] {}, TimedAfter::lead_kernel);
  return std::max(0.0f, median_replay_ms(launch, TimedAfter::lead_kernel) - lead_ms_);
}

float ColdTimer::median_replay_ms(const std::function<void()>& launch, TimedAfter after) {
  DeviceBackend& gpu = backend(device_);
  // The caller's stream is idle (the constructor waited for it, and the caller queues nothing
  // while it times), so the measuring stream needs no ordering against it.
  std::lock_guard<std::recursive_mutex> lock(measuring_mutex(device_.index));
  UncountedReplays uncounted;
  Stream& stream = measuring_stream(device_);
  StreamGuard current(stream);
  const auto native = static_cast<gpuStream_t>(stream.native_handle());
  try {
    launch();  // outside the capture: whatever measures or allocates on first use does it here
    gpu.begin_capture(stream);
    try {
      if (after == TimedAfter::lead_kernel) launch_lead(native, device_.index);
      launch();
    } catch (...) {
      try {
        (void)gpu.end_capture(stream);
      } catch (...) {  // the launch's error is the one to report
      }
      throw;
    }
    std::unique_ptr<GraphExec> graph = gpu.end_capture(stream);
    graph->replay(stream);
    TimingEvents events(2 * kRuns);
    for (int run = 0; run < kRuns; ++run) {
      flush(native);
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

const SkinnyVariant* fastest_skinny_variant(ColdTimer& timer, const SkinnyProblem& skinny,
                                            TimedAfter after, const SkinnyRule& rule,
                                            std::vector<std::string>& timings) {
  float best_ms = INFINITY;
  const SkinnyVariant* best = nullptr;
  const Device device{kGpuDeviceType, skinny.device};
  for (const SkinnyVariant& variant : skinny_variants()) {
    if (!variant.fits(skinny)) continue;
    const float ms =
        timer.median_graph_ms([&] { variant.launch(skinny, current_stream(device)); }, after);
    timings.push_back(fmt::format("{} {:.1f} us", variant.name, 1e3 * ms));
    if (ms < best_ms && rule.replaces(ms)) {
      best_ms = ms;
      best = &variant;
    }
  }
  return best;
}

}  // namespace tessera::gpu
