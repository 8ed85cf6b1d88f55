// Split: orders the graph's calls into steps and cuts it into pieces at the splitting ops, which
// run on their own between the compiled pieces (attention, with its metadata from the forward
// context). The graph is final from here on, so the split also sizes the plan (max_sizes).
#include <algorithm>

#include "compile/ir/op_registry.h"
#include "compile/passes/pass.h"
#include "runtime/check.h"

namespace tessera {
namespace {

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

// Every symbol at its largest value: the graph is final once split, and what follows sizes the
// plan's views and buffers for these values.
Bindings largest_sizes(const Graph& graph, int64_t max_dynamic_size) {
  Bindings sizes;
  for (size_t id = 0; id < graph.num_values(); ++id)
    for (const SymInt& size : graph.value(static_cast<int>(id)).meta.shape)
      for (const std::string& name : size.symbols()) sizes[name] = max_dynamic_size;
  return sizes;
}

class SplitPass final : public Pass {
 public:
  std::string_view name() const override { return "split"; }
  void run(CompiledPlan& plan, const PassContext& context) const override {
    plan.steps = split_into_pieces(plan.graph, context.config.splitting_ops, &plan.num_pieces);
    plan.max_sizes = largest_sizes(plan.graph, context.max_dynamic_size);
  }
};

}  // namespace

TESSERA_REGISTER_PASS(SplitPass);

}  // namespace tessera
