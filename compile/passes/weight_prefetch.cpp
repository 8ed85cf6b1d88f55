// Weight prefetch: at decode a GEMM's time is its weight's one pass through memory, and between
// two GEMMs run small kernels (norms, rope, attention) that leave the memory idle. This pass marks
// each GEMM step with the constant weight of the next GEMM step (Step::prefetch); a skinny GEMM
// kernel starts pulling the first bytes of that weight into the L2 cache as it ends
// (kernels/cuda/gemm/l2_prefetch.h), so they stream in behind the small kernels and the next GEMM
// finds them there. Only a hint: a kernel that does not prefetch (the library's) runs as before.
// It applies to CUDA plans and runs after the steps are final (materialize); `tessera explain`
// shows each step's prefetch.
#include <optional>

#include "compile/passes/pass.h"

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

void plan_weight_prefetch(CompiledPlan& plan) {
  for (Step& step : plan.steps) step.prefetch = -1;
  Step* previous = nullptr;  // the last GEMM step, waiting for the next one's weight
  int previous_weight = -1;
  for (Step& step : plan.steps) {
    const std::optional<int> weight = streamed_weight(plan, step);
    if (!weight) continue;
    // The next GEMM's weight when it is a constant: a computed one may not exist yet, and a GEMM
    // with a computed weight prefetches the constant of the GEMM after it like any other.
    if (previous != nullptr && *weight >= 0 && *weight != previous_weight)
      previous->prefetch = *weight;
    previous = &step;
    previous_weight = *weight;
  }
}

class WeightPrefetchPass final : public Pass {
 public:
  std::string_view name() const override { return "weight_prefetch"; }
  // Only CUDA kernels read the prefetch hint (kernels/cuda/gemm/l2_prefetch.cuh).
  bool applies(const PassContext& context) const override {
    return context.device.type == DeviceType::cuda &&
           context.config.pass_config.enable_weight_prefetch;
  }
  void run(CompiledPlan& plan, const PassContext&) const override { plan_weight_prefetch(plan); }
};

}  // namespace

TESSERA_REGISTER_PASS(WeightPrefetchPass);

}  // namespace tessera
