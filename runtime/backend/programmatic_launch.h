// Hopper's programmatic dependent launch (PDL): a kernel launched with it may be scheduled while
// the kernel before it on the stream is still running, so its launch and the previous kernel's
// tail overlap; the kernel waits (griddepcontrol.wait) for the grids before it to finish before
// it touches what they wrote. Every Tessera GPU kernel that may be launched this way waits first
// (kernels/cuda/programmatic_launch.cuh), so stream order holds either way. Whether launches use
// it is this thread's setting, installed by the model runner from
// compilation.programmatic_dependent_launch around its forwards and captures; it applies on
// devices of compute capability 9.0 and later, and never on HIP.
#pragma once

namespace tessera {

// This thread's setting: off unless a ProgrammaticLaunchScope turned it on.
bool programmatic_launch_enabled();

class ProgrammaticLaunchScope {
 public:
  explicit ProgrammaticLaunchScope(bool enabled);
  ~ProgrammaticLaunchScope();
  ProgrammaticLaunchScope(const ProgrammaticLaunchScope&) = delete;
  ProgrammaticLaunchScope& operator=(const ProgrammaticLaunchScope&) = delete;

 private:
  bool previous_;
};

}  // namespace tessera
