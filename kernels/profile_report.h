// The tables of a step's profile (kernels/profiler.h): per kernel class with the host gaps, per
// region (compiled piece, attention, logits, ...), and the kernels that took the most time, each
// with its time, bytes moved, achieved GB/s and TFLOP/s and share of the step; and the launch
// counts of a step.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/profiler.h"

namespace tessera {

// The measured ceilings the achieved rates are set against (0: not measured, no column).
struct ProfileCeilings {
  double copy_gb_per_s = 0;  // device-to-device copy, read + write
  double gemm_tflops = 0;
};

// The three tables of a timed profiler after stop(); `top_kernels` rows in the last. Shares are
// of `step_ms`, the step's time measured without the profiler (wall clock, graphs as they run),
// and what it holds beyond the kernels and the device's gaps is the host's row; with step_ms 0
// shares are of the profiled kernels and gaps, and there is no host row.
std::string format_profile(const KernelProfiler& profiler, const ProfileCeilings& ceilings,
                           size_t top_kernels, double step_ms);
// "launches per step: 154 (gemm 113, attention 16, ...); 34 graph replays holding 640 nodes".
std::string format_launch_counts(const KernelProfiler& profiler);

}  // namespace tessera
