// The step profiler's stream gates: see stream_gates.h.
#include "kernels/cuda/backend/stream_gates.h"

#include <chrono>
#include <condition_variable>

#include "kernels/cuda/gpu_runtime.h"

namespace tessera::gpu {

// A wait queued on a stream: a host function that blocks until the host opens it or kGateTimeout
// passes (so that a synchronizing call the backend does not see cannot hang the process).
struct StreamGate {
  std::mutex mutex;
  std::condition_variable opened_signal;
  bool opened = false;
  bool timed_out = false;
};

namespace {

#if !defined(TESSERA_GPU_HIP)
constexpr auto kGateTimeout = std::chrono::milliseconds(200);

void wait_at_gate(void* data) {
  auto* held = static_cast<std::shared_ptr<StreamGate>*>(data);
  {
    StreamGate& gate = **held;
    std::unique_lock lock(gate.mutex);
    if (!gate.opened_signal.wait_for(lock, kGateTimeout, [&] { return gate.opened; }))
      gate.timed_out = true;
  }
  delete held;
}
#endif

}  // namespace

bool StreamGates::hold(gpuStream_t stream) {
#if defined(TESSERA_GPU_HIP)
  // HIP 5.2 has no hipLaunchHostFunc: no gate, so the profiler times without holding.
  (void)stream;
  return false;
#else
  std::lock_guard lock(mutex_);
  for (const auto& [held_stream, gate] : held_)
    if (held_stream == stream) return false;
  gpuStreamCaptureStatus capture = gpuStreamCaptureStatusNone;
  GPU_CHECK(gpuStreamIsCapturing(stream, &capture));
  if (capture != gpuStreamCaptureStatusNone) return false;
  auto gate = std::make_shared<StreamGate>();
  auto* handed = new std::shared_ptr<StreamGate>(gate);
  const gpuError_t error = gpuLaunchHostFunc(stream, wait_at_gate, handed);
  if (error != gpuSuccess) {
    delete handed;
    throw_runtime_error("gpuLaunchHostFunc(stream, wait_at_gate, handed)", __FILE__, __LINE__,
                        error);
  }
  held_.emplace_back(stream, std::move(gate));
  return true;
#endif
}

void StreamGates::open_all() {
  std::lock_guard lock(mutex_);
  for (auto& [stream, gate] : held_) {
    {
      std::lock_guard gate_lock(gate->mutex);
      timeouts_ += gate->timed_out ? 1 : 0;
      gate->opened = true;
    }
    gate->opened_signal.notify_all();
  }
  held_.clear();
}

size_t StreamGates::take_timeouts() {
  std::lock_guard lock(mutex_);
  return std::exchange(timeouts_, 0);
}

StreamGates& stream_gates() {
  static StreamGates gates;
  return gates;
}

}  // namespace tessera::gpu
