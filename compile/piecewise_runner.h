// Runs a compiled plan: the steps in order over one arena that stays at a fixed address across
// calls (what makes graph capture of the pieces safe), with splitting ops between the pieces.
// Fused kernels run as generated C++ on the CPU and as NVRTC kernels on CUDA devices (on the
// current stream); devices without a code generator run a fused group's ops one by one (and say
// so once).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "compile/compiled_plan.h"

namespace tessera {

class PiecewiseRunner {
 public:
  explicit PiecewiseRunner(std::shared_ptr<const CompiledPlan> plan);
  std::vector<Tensor> run(std::span<const Tensor> inputs);
  // Steps that launch device work (library kernels, fused kernels, splitting ops) per call.
  size_t launches_per_call() const;

 private:
  void run_fused(const FusedKernel& kernel, std::vector<Tensor>& values, const Bindings& bindings);
  Tensor slot_tensor(int value, const Bindings& bindings);

  std::shared_ptr<const CompiledPlan> plan_;
  Device device_;
  Tensor arena_;
};

}  // namespace tessera
