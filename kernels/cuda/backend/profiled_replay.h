// TESSERA_PROFILE_REPLAY=N: the N-th counted graph replay of the process runs inside the
// profiler's range (cudaProfilerStart/Stop), so that `ncu --profile-from-start off
// --graph-profiling node` times the kernels of one replayed step as the graph runs them
// (scripts/gpu_kernel_times.sh). The model runner's replays count; the cold timer's do not.
#pragma once

#include <cstdint>

namespace tessera::gpu {

// N, or 0 when the variable is unset or empty; anything but a positive integer is an error
// naming it. Read once; the backend reads it when its first device starts.
int64_t profiled_replay_number();

// Counts a replay (unless an UncountedReplays lives on this thread) and says whether it is the
// profiled one.
bool profiled_replay();

// While one lives, this thread's graph replays are not counted (the cold timer's, which would
// otherwise shift which step is profiled).
class UncountedReplays {
 public:
  UncountedReplays();
  ~UncountedReplays();
  UncountedReplays(const UncountedReplays&) = delete;
  UncountedReplays& operator=(const UncountedReplays&) = delete;

 private:
  bool previous_;
};

}  // namespace tessera::gpu
