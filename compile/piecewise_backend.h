// Runs a compiled plan as pieces with splitting ops between them (vLLM's PiecewiseBackend), over
// one static arena that holds the graph inputs' slots and every materialized value: a call copies
// its inputs into their slots, launches piece 0, the first splitting op, piece 1, ... and returns
// the outputs as tensors in the arena, valid until the next call. Everything a launch needs is
// bound once per token count and kept (BoundPlan), so a call of a size seen before does no
// shape arithmetic, no registry look-up and no meta function: it launches. Generated kernels come
// from the device's codegen target (compile/codegen/codegen_target.h).
#pragma once

#include <functional>
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
  // One device graph per piece once this size is captured (capture()); calls then replay them.
  std::vector<std::unique_ptr<GraphExec>> graphs;
  // Bound through bind_tokens(): a caller's graph holds its addresses, so it is never evicted.
  bool pinned = false;
};

// What capture() did, for the startup log.
struct CaptureSummary {
  std::vector<int64_t> sizes;  // token counts captured, ascending
  size_t graphs = 0;
  double seconds = 0;
  size_t device_bytes = 0;  // device memory the graphs took (free memory before - after)
};

class PiecewiseBackend {
 public:
  explicit PiecewiseBackend(std::shared_ptr<const CompiledPlan> plan);

  // Copies `inputs` into their slots and runs every piece on the current stream. The results
  // are views of the arena: valid until the next call and while this backend lives; clone what
  // must outlive either.
  std::vector<Tensor> run(std::span<const Tensor> inputs);

  // The symbol values `inputs` give the graph's dynamic dims; throws past the plan's sizes.
  Bindings bindings_of(std::span<const Tensor> inputs) const;
  // The plan bound at `bindings`, made on first use and kept.
  const BoundPlan& bind(const Bindings& bindings);
  // The plan bound at the one symbol's value `tokens` (graph capture's sizes).
  // Bindings bound this way stay for the backend's life (callers capture graphs over them).
  const BoundPlan& bind_tokens(int64_t tokens);
  // Copies `inputs` into the slots of `bound` on the current stream.
  void copy_inputs(const BoundPlan& bound, std::span<const Tensor> inputs) const;
  // Launches every piece and splitting op of `bound` on `stream`, never the piece graphs: what a
  // whole-forward capture records (the model runner's decode graphs capture more around it).
  void launch_all(const BoundPlan& bound, Stream& stream) const;
  // Launches piece `index` of `bound` on `stream`, or the splitting op after it.
  void launch_piece(const BoundPlan& bound, int index, Stream& stream) const;
  void launch_splitting(const BoundPlan& bound, int index, Stream& stream) const;

  // Captures every piece at each token count of `sizes` into device graphs (largest first, each
  // after `warmups` uncaptured launches, as vLLM does); later calls of a captured size replay
  // them, with the splitting ops launched between the replays. The plan must have one dynamic
  // symbol (the token count) and its device must support graphs. Sizes past the plan's largest
  // are an error.
  // `on_progress` (when given) hears (sizes done, sizes in all) after each size.
  CaptureSummary capture(const std::vector<int64_t>& sizes, int64_t warmups,
                         const std::function<void(size_t, size_t)>& on_progress = {});
  // The captured token counts, ascending (empty before capture()).
  const std::vector<int64_t>& captured_sizes() const { return captured_sizes_; }

  const std::vector<Piece>& pieces() const { return pieces_; }
  const CompiledPlan& plan() const { return *plan_; }
  Device device() const { return device_; }
  size_t launches_per_call() const { return plan_->launches_per_call(); }

 private:
  BoundPlan& bound_plan(const Bindings& bindings);
  Bindings token_bindings(int64_t tokens) const;  // the plan's one symbol at `tokens`
  // The stream captures run on, after checking the device and the warm-up count.
  Stream& capture_stream(int64_t warmups);
  void zero_inputs(const BoundPlan& bound) const;
  void run_bound(const BoundPlan& bound, Stream& stream) const;  // launches, or piece replays
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
  std::vector<int64_t> captured_sizes_;
  std::unique_ptr<Stream> capture_stream_;
};

// Captures what `launches` queues on `stream` into one device graph. On an error the capture is
// ended (the stream stays usable) and the error goes on; the result holds the graph and the
// device memory it took (free memory before - after).
struct CapturedGraph {
  std::unique_ptr<GraphExec> graph;
  size_t device_bytes = 0;
};
CapturedGraph capture_graph(Device device, Stream& stream,
                            const std::function<void(Stream&)>& launches);

// Bindings kept per backend besides the captured ones: the recent sizes.
inline constexpr size_t kMaxBoundPlans = 128;

}  // namespace tessera
