// Weight prefetch: at decode a GEMM's time is its weight's one pass through memory, and between
// two GEMMs run small kernels (norms, rope, attention) that leave the memory idle. This pass marks
// each GEMM step with the constant weight of the next GEMM step (Step::prefetch); a skinny GEMM
// kernel starts pulling the first bytes of that weight into the L2 cache as it ends
// (kernels/cuda/l2_prefetch.h), so they stream in behind the small kernels and the next GEMM
// finds them there. A splitting op's step (attention) before a GEMM is marked with that GEMM's
// weight too: its kernel runs right before the GEMM and leaves the memory idle for most of its
// time, so it can ask for the weight from its start (the tensor-core decode kernel does), also
// where the GEMM before it is the library's, which cannot. Only a hint: a kernel that does not
// prefetch (the library's) runs as before. The compiler runs it for CUDA plans, after the steps
// are final (materialize); `tessera explain` shows each step's prefetch.
#include <optional>
#include <vector>

#include "compile/passes/passes.h"

namespace tessera {
namespace {

// The weight value a GEMM step streams: a constant (there before any step runs), -1 for a GEMM
// whose weight is computed, or nullopt for a step that is no GEMM.
std::optional<int> streamed_weight(const CompiledPlan& plan, const Step& step) {
  if (step.kind != StepKind::library) return std::nullopt;
  const Node& node = plan.graph.nodes()[step.node];
  const int input = node.op->streamed_weight;
  if (input < 0 || static_cast<size_t>(input) >= node.inputs.size()) return std::nullopt;
  const int weight = node.inputs[input];
  const Node& producer = plan.graph.nodes()[plan.graph.value(weight).producer];
  return producer.kind == NodeKind::constant ? weight : -1;
}

}  // namespace

void plan_weight_prefetch(CompiledPlan& plan, const PassConfig& config) {
  for (Step& step : plan.steps) step.prefetch = -1;
  if (!config.enable_weight_prefetch) return;
  Step* previous = nullptr;  // the last GEMM step, waiting for the next one's weight
  int previous_weight = -1;
  std::vector<Step*> splitting;  // splitting steps since it
  for (Step& step : plan.steps) {
    if (step.kind == StepKind::splitting) splitting.push_back(&step);
    const std::optional<int> weight = streamed_weight(plan, step);
    if (!weight) continue;
    // The next GEMM's weight when it is a constant: a computed one may not exist yet, and a GEMM
    // with a computed weight prefetches the constant of the GEMM after it like any other.
    if (*weight >= 0) {
      if (previous != nullptr && *weight != previous_weight) previous->prefetch = *weight;
      for (Step* before : splitting) before->prefetch = *weight;
    }
    splitting.clear();
    previous = &step;
    previous_weight = *weight;
  }
}

}  // namespace tessera
