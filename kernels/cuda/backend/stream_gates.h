// The step profiler's stream gates (DeviceBackend::hold_stream): a wait queued on a stream holds
// its later work back while the host queues a step, so that the profiler's events time the
// device, not the host's launches. Every synchronizing call of the backend opens them first (a
// stream held back by its gate would otherwise never finish).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/cuda/gpu_vendor.h"

namespace tessera::gpu {

struct StreamGate;

class StreamGates {
 public:
  // Queues a gate on `stream`; false (nothing queued) when one is held there already, the stream
  // is capturing, or the runtime has no host functions (HIP 5.2).
  bool hold(gpuStream_t stream);
  void open_all();
  // How many gates were opened by their timeout rather than by the host, since the last call.
  size_t take_timeouts();

 private:
  std::mutex mutex_;
  // A few streams at most, so a list (hipcc 5.2's clang crashes instantiating a std::map of these).
  std::vector<std::pair<gpuStream_t, std::shared_ptr<StreamGate>>> held_;
  size_t timeouts_ = 0;
};

// The process's gates, one per stream at most.
StreamGates& stream_gates();

}  // namespace tessera::gpu
