// Runs a compiled plan as pieces with splitting ops between them (vLLM's PiecewiseBackend), over
// one static arena that holds the graph inputs' slots and every materialized value: a call copies
// its inputs into their slots, launches piece 0, the first splitting op, piece 1, ... and returns
// the outputs as tensors in the arena, valid until the next call. Everything a launch needs is
// bound once per token count and kept (BoundPlan), so a call of a size seen before does no
// shape arithmetic, no registry look-up and no meta function: it launches. Generated kernels come
// from the device's codegen target (compile/codegen/codegen_target.h).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <vector>

#include "compile/compiled_plan.h"
#include "compile/piece.h"

namespace tessera {

// The plan bound to one set of symbol values (one token count).
struct BoundPlan {
  Bindings bindings;
  uint64_t last_used = 0;                      // for evicting the least recently used binding
  std::vector<Tensor> inputs;                  // the graph inputs' slots
  std::vector<std::vector<BoundStep>> pieces;  // per piece, per step
  std::vector<BoundStep> splitting;            // the splitting op after piece i
  std::vector<Tensor> outputs;                 // the graph's outputs (arena slots or constants)
};

class PiecewiseBackend {
 public:
  explicit PiecewiseBackend(std::shared_ptr<const CompiledPlan> plan);

  // Copies `inputs` into their slots and runs every piece on the current stream. The results
  // live in the arena until the next call; clone what must outlive it.
  std::vector<Tensor> run(std::span<const Tensor> inputs);

  // The symbol values `inputs` give the graph's dynamic dims; throws past the plan's sizes.
  Bindings bindings_of(std::span<const Tensor> inputs) const;
  // The plan bound at `bindings`, made on first use and kept.
  const BoundPlan& bind(const Bindings& bindings);
  void copy_inputs(const BoundPlan& bound, std::span<const Tensor> inputs) const;
  // Launches piece `index` of `bound` on `stream`, or the splitting op after it.
  void launch_piece(const BoundPlan& bound, int index, Stream& stream) const;
  void launch_splitting(const BoundPlan& bound, int index, Stream& stream) const;

  const std::vector<Piece>& pieces() const { return pieces_; }
  const CompiledPlan& plan() const { return *plan_; }
  Device device() const { return device_; }
  size_t launches_per_call() const { return plan_->launches_per_call(); }

 private:
  ResolvedStep resolve(const Step& step) const;
  BoundStep bind_step(const ResolvedStep& step, std::vector<Tensor>& values,
                      const Bindings& bindings) const;
  Tensor slot(int value, const Bindings& bindings) const;

  std::shared_ptr<const CompiledPlan> plan_;
  Device device_;
  Tensor arena_;
  std::vector<Piece> pieces_;
  std::vector<ResolvedStep> splitting_;
  std::map<Bindings, std::unique_ptr<BoundPlan>> bound_;
  uint64_t calls_ = 0;
};

// Bindings kept per backend: every decode size and the recent prefill sizes.
inline constexpr size_t kMaxBoundPlans = 128;

}  // namespace tessera
