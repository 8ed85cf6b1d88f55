#include "compile/piece.h"

#include <fmt/format.h>

#include "compile/codegen/codegen_target.h"
#include "compile/launch_profile.h"
#include "runtime/check.h"
#include "runtime/profiler/profiler.h"

namespace tessera {

void BoundStep::launch(Stream& stream) const {
  if (empty) return;
  switch (step->kind) {
    case StepKind::view:
      return;  // an alias: bound once, nothing to run
    case StepKind::fused: {
      ProfiledLaunch profiled(step->kernel->name, KernelClass::fused, [&] {
        return LaunchDetail{fused_bytes, 0, fmt::format("{} rows", rows)};
      });
      step->kernel->compiled->launch(rows, buffers.data(), stream);
      return;
    }
    case StepKind::copy: {
      ProfiledLaunch profiled("copy", KernelClass::copy, [&] {
        return LaunchDetail{
            tensor_bytes(inputs) + tensor_bytes(outputs), 0,
            fmt::format("{} {}", fmt::join(outputs[0].sizes(), "x"), step->node->op->name)};
      });
      const Attributes no_attributes;
      step->library_kernel(KernelArgs{inputs, no_attributes, outputs});
      return;
    }
    case StepKind::library:
    case StepKind::splitting: {
      const OpDef& op = *step->node->op;
      const Attributes& attributes = step->node->attributes;
      ProfiledLaunch profiled(op.name, kernel_class_of(op),
                              [&] { return launch_detail(op, inputs, outputs, attributes); });
      step->library_kernel(KernelArgs{inputs, attributes, outputs,
                                      prefetch.defined() ? &prefetch : nullptr,
                                      step->follows_splitting_op});
      return;
    }
  }
}

void Piece::launch(std::span<const BoundStep> bound, Stream& stream) const {
  TESSERA_CHECK(bound.size() == steps_.size(), "piece {}: {} bound steps for {} steps", index_,
                bound.size(), steps_.size());
  StreamGuard on_stream(stream);
  ProfileRegion region("piece", index_);
  for (const BoundStep& step : bound) step.launch(stream);
}

}  // namespace tessera
