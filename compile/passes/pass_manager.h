// The pass pipeline: the registered passes in their order (pass_manager.cpp lists it), of which a
// compile runs those that apply to its device and pass_config. The manager times each pass into
// CompiledPlan::timings (`tessera explain` prints them) and names each dump after its pass.
#pragma once

#include <string>
#include <vector>

#include "compile/custom_op_config.h"
#include "compile/passes/pass.h"

namespace tessera {

class PassManager {
 public:
  // The pipeline's passes that apply to `context`, in order. With `only`, just those named there
  // (each a registered pass): what a test runs of the pipeline.
  explicit PassManager(const PassContext& context, const std::vector<std::string>& only = {});

  std::vector<std::string> names() const;  // the passes it runs, in order
  // Runs each pass in order: times it into plan.timings and, when dumps are on, writes the graph
  // it starts from as 00-traced.txt and each pass's result as NN-name.txt (NN: its position).
  void run(CompiledPlan& plan) const;

 private:
  PassContext context_;
  std::vector<const Pass*> passes_;
};

// `custom_ops` with the custom ops the pipeline's passes match enabled for tracing (unless the
// list disables one by name): rotary_embedding for the rotary-attention pass.
CustomOpConfig custom_ops_for_passes(const CustomOpConfig& custom_ops, const PassConfig& config);

}  // namespace tessera
