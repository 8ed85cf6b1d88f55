#include "compile/piece.h"

#include "compile/codegen/codegen_target.h"
#include "kernels/check.h"

namespace tessera {

void BoundStep::launch(Stream& stream) const {
  if (empty) return;
  switch (step->kind) {
    case StepKind::view:
      return;  // an alias: bound once, nothing to run
    case StepKind::fused:
      step->kernel->compiled->launch(rows, buffers.data(), stream);
      return;
    case StepKind::copy:
    case StepKind::library:
    case StepKind::splitting: {
      const Attributes no_attributes;
      const Attributes& attributes =
          step->kind == StepKind::copy ? no_attributes : step->node->attributes;
      step->library_kernel(KernelArgs{inputs, attributes, outputs});
      return;
    }
  }
}

void Piece::launch(std::span<const BoundStep> bound, Stream& stream) const {
  TESSERA_CHECK(bound.size() == steps_.size(), "piece {}: {} bound steps for {} steps", index_,
                bound.size(), steps_.size());
  StreamGuard on_stream(stream);
  for (const BoundStep& step : bound) step.launch(stream);
}

}  // namespace tessera
