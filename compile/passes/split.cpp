// Split: orders the graph's calls into steps and cuts it into pieces at the splitting ops, which
// run on their own between the compiled pieces (attention, with its metadata from the forward
// context).
#include <algorithm>

#include "compile/op_registry.h"
#include "compile/passes/passes.h"
#include "kernels/check.h"

namespace tessera {

std::vector<Step> split_into_pieces(const Graph& graph,
                                    const std::vector<std::string>& splitting_ops,
                                    int* num_pieces) {
  for (const std::string& name : splitting_ops) {
    const OpDef* op = OpRegistry::global().find(name);
    TESSERA_REQUIRE(op != nullptr, "compilation.splitting_ops: '{}' is not a registered op", name);
  }
  auto listed = [&](const std::string& name) {
    return std::find(splitting_ops.begin(), splitting_ops.end(), name) != splitting_ops.end();
  };
  // Ops of kind splitting (attention: its KV cache and metadata live outside the graph) always
  // split: a list without them would be a setting that does nothing.
  for (const OpDef* op : OpRegistry::global().all()) {
    TESSERA_REQUIRE(op->kind != OpKind::splitting || listed(op->name) ||
                        (!op->splits_as.empty() && listed(op->splits_as)),
                    "compilation.splitting_ops must list '{}': it always runs between the "
                    "compiled pieces",
                    op->splits_as.empty() ? op->name : op->splits_as);
  }
  std::vector<Step> steps;
  int piece = 0;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    if (node.kind != NodeKind::call) continue;
    Step step;
    step.node = static_cast<int>(i);
    step.piece = piece;
    const bool splitting = node.op->kind == OpKind::splitting || listed(node.op->name);
    if (splitting) {
      step.kind = StepKind::splitting;
      ++piece;
    } else {
      step.kind = node.op->kind == OpKind::view ? StepKind::view : StepKind::library;
    }
    steps.push_back(step);
  }
  *num_pieces = piece + 1;
  return steps;
}

}  // namespace tessera
