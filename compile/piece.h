// A piece of a compiled plan: the steps between two splitting ops, with everything they launch
// resolved when the plan is loaded (generated kernels loaded by the codegen target, library kernels
// looked up once), and their tensors bound once per token count at fixed addresses in the static
// arena. Launching a bound piece is a plain loop of launches on one stream: it can be captured into
// a device graph and replayed on its own (vLLM's PiecewiseBackend + CUDAGraphWrapper).
#pragma once

#include <span>
#include <vector>

#include "compile/compiled_plan.h"
#include "runtime/backend/backend.h"
#include "runtime/kernel_registry.h"

namespace tessera {

// One step of a piece (or a splitting op), resolved.
struct ResolvedStep {
  StepKind kind = StepKind::library;
  const Node* node = nullptr;           // view, copy, library, splitting
  const FusedKernel* kernel = nullptr;  // fused
  KernelFn library_kernel = nullptr;    // library, splitting: the op's kernel; copy: "copy"
  int prefetch = -1;                    // library: Step::prefetch
  bool follows_splitting_op = false;    // Step::follows_splitting_op
};

// A resolved step's tensors for one token count. Nothing here changes between calls of that
// size: the addresses are the arena's, the constants the plan's.
struct BoundStep {
  const ResolvedStep* step = nullptr;
  std::vector<Tensor> inputs;  // library, splitting: as the kernel takes them; copy: the source
  mutable std::vector<Tensor> outputs;  // arena slots (kernels take them as a mutable span)
  std::vector<void*> buffers;           // fused: inputs then outputs
  Tensor prefetch;                      // library: the next GEMM's weight (Step::prefetch)
  int64_t rows = 0;                     // fused
  double fused_bytes = 0;               // fused: what its buffers hold (the step profiler's)
  bool empty = false;                   // no output elements: nothing to launch

  // Launches the step on the current stream (`stream`, for generated kernels).
  void launch(Stream& stream) const;
};

class Piece {
 public:
  Piece(int index, std::vector<ResolvedStep> steps) : index_(index), steps_(std::move(steps)) {}
  int index() const { return index_; }
  const std::vector<ResolvedStep>& steps() const { return steps_; }
  // Launches the piece's bound steps (bound from steps(), in order) on `stream`.
  void launch(std::span<const BoundStep> bound, Stream& stream) const;

 private:
  int index_;
  std::vector<ResolvedStep> steps_;
};

}  // namespace tessera
