// Marks each step whose kernel runs right after a splitting op's (Step::follows_splitting_op):
// in a decode step the attention's kernels spread over the SMs, so the kernel after them (the
// o projection) cannot load its weights beside them as a programmatic launch does beside a norm,
// and a GEMM there times its paths without that overlap (kernels/cuda/gemm/gemm.cpp). A view
// launches nothing and is passed over; any other step ends the mark.
#include "compile/passes/pass.h"

namespace tessera {
namespace {

void mark_steps_following_splitting_ops(CompiledPlan& plan) {
  bool after_splitting = false;
  for (Step& step : plan.steps) {
    if (step.kind == StepKind::view) {
      step.follows_splitting_op = false;
      continue;
    }
    step.follows_splitting_op = after_splitting && step.kind != StepKind::splitting;
    after_splitting = step.kind == StepKind::splitting;
  }
}

class FollowsSplittingPass final : public Pass {
 public:
  std::string_view name() const override { return "follows_splitting"; }
  void run(CompiledPlan& plan, const PassContext&) const override {
    mark_steps_following_splitting_ops(plan);
  }
};

}  // namespace

TESSERA_REGISTER_PASS(FollowsSplittingPass);

}  // namespace tessera
