// The tables of a step's profile (runtime/profiler/profiler.h): per kernel class with the device's
// gaps, per region (compiled piece, attention, logits, ...), and the kernels that took the most
// time, each with its time, bytes moved, achieved GB/s and TFLOP/s and share of the step; and the
// launch counts of a step.
#pragma once

#include <cstddef>
#include <string>

#include "runtime/profiler/profiler.h"

namespace tessera {

// The measured ceilings the achieved rates are set against (0: not measured, no column).
struct ProfileCeilings {
  double copy_gb_per_s = 0;  // device-to-device copy, read + write
  double gemm_tflops = 0;
};

// The three tables of a timed profiler after stop(); `top_kernels` rows in the last. Shares are
// of the profiled kernels and the device's gaps between them.
std::string format_profile(const KernelProfiler& profiler, const ProfileCeilings& ceilings,
                           size_t top_kernels);
// A counting profiler's step: "25 launched from the host (gemm 9, ...), 1 graph replay holding 177
// nodes; on the device the step took 1.62 ms, the graph replays 1.10 ms of it".
std::string format_launch_counts(const KernelProfiler& profiler);

}  // namespace tessera
