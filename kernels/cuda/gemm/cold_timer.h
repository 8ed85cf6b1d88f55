// Times a launch as a decode step sees it: cold, with its operands evicted from L2 before each
// run (in a step the weights come from memory). What the per-shape path choices of linear
// (gemm.cpp) and of activation_and_mul_linear are measured with.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/gemm/skinny_choice.h"
#include "kernels/cuda/gemm/skinny_gemm.h"
#include "kernels/cuda/gpu_vendor.h"
#include "runtime/device.h"

namespace tessera::gpu {

class ColdTimer {
 public:
  // Waits for the device's current stream, then allocates and zeroes a buffer twice the L2's size.
  explicit ColdTimer(Device device);
  ~ColdTimer();
  ColdTimer(const ColdTimer&) = delete;
  ColdTimer& operator=(const ColdTimer&) = delete;

  // What `launch` (which launches on the current stream) adds to a decode step: captured into a
  // device graph, as a step runs it (launches cost a graph node's latency, not a stream launch's),
  // behind what `after` says, the median time of the replays (less the lead kernel's own). It
  // runs on a measuring stream of the timer's device, current while `launch` runs (one per device
  // for the process: libraries keep per-stream state), one thread at a time, and returns with
  // that stream idle.
  float median_graph_ms(const std::function<void()>& launch, TimedAfter after);

  // The lock that gives one thread at a time `device`'s measuring stream (a capture on a stream
  // takes whatever else is launched onto it). Recursive: a timed launch may time another on its
  // first call, outside the capture (the gated kernel's two steps run linear, whose path is
  // measured on its first call). Lock order: this before the BLAS context's lock (gemm.cpp).
  // One per device, never one for the process: its holder waits for its device's queued work,
  // which in a tensor-parallel group may be a collective that another rank, waiting for the same
  // lock, has not launched yet (a deadlock on a cold cache, issue 40).
  static std::recursive_mutex& measuring_mutex(int device);

 private:
  float median_replay_ms(const std::function<void()>& launch, TimedAfter after);
  void flush(gpuStream_t stream);  // evicts L2 (clean lines) on `stream`

  Device device_;
  float lead_ms_ = -1.0f;  // the lead kernel's median, once measured
  size_t flush_bytes_ = 0;
  void* flush_ = nullptr;
};

// Times every skinny variant that fits `skinny` (launched on the current stream) with `timer`,
// behind `after`, appending "<name> <time> us" to `timings`, and returns the fastest one that
// replaces the path it competes with by `rule`, or nullptr.
const SkinnyVariant* fastest_skinny_variant(ColdTimer& timer, const SkinnyProblem& skinny,
                                            TimedAfter after, const SkinnyRule& rule,
                                            std::vector<std::string>& timings);

}  // namespace tessera::gpu
