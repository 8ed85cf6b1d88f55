// Materialize: a compiled piece runs at fixed addresses, so no step may allocate while it runs.
// A view step is an alias of its input, except where a reader needs contiguous memory and the
// view may be strided (a column slice, a transpose): it then becomes a copy step into a planned
// buffer of its own. Readers needing contiguous memory: fused kernels, kernels without
// strided_inputs, and other views (a reshape of a strided view would copy while it runs).
// Whether a view may be strided is found by applying the op's eager (view) function to a
// contiguous stand-in tensor at several sizes of the symbols: no list of op names is needed.
#include <set>

#include "compile/passes/pass.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// Symbol values to probe strides at: small (where a dim of 1 could hide a stride) and largest.
std::vector<Bindings> probe_bindings(const CompiledPlan& plan) {
  std::vector<Bindings> probes;
  for (int64_t size : {2, 3}) {
    Bindings small;
    for (const auto& [symbol, largest] : plan.max_sizes) small[symbol] = std::min(size, largest);
    probes.push_back(small);
  }
  probes.push_back(plan.max_sizes);
  return probes;
}

Tensor contiguous_stand_in(const TensorMeta& meta, const Bindings& bindings) {
  Shape sizes;
  for (const SymInt& size : meta.shape) sizes.push_back(size.evaluate(bindings));
  return Tensor::from_blob(nullptr, sizes, meta.dtype, kCPU);
}

// Whether the view of a contiguous input is strided at any probed size.
bool view_may_be_strided(const Graph& graph, const Node& node,
                         const std::vector<Bindings>& probes) {
  TESSERA_CHECK(node.op->eager, "view step {} has no eager (view) function", node.op->name);
  for (const Bindings& bindings : probes) {
    std::vector<Tensor> inputs;
    for (int id : node.inputs)
      inputs.push_back(contiguous_stand_in(graph.value(id).meta, bindings));
    if (!node.op->eager(inputs, node.attributes).at(0).is_contiguous()) return true;
  }
  return false;
}

void materialize_views(CompiledPlan& plan) {
  const Graph& graph = plan.graph;
  std::vector<Bindings> probes = probe_bindings(plan);
  std::vector<bool> strided(graph.num_values(), false);
  std::vector<int> view_step(graph.num_values(), -1);  // the view step producing a value
  auto need_contiguous = [&](int id) {
    if (!strided[id]) return;
    plan.steps[view_step[id]].kind = StepKind::copy;
    strided[id] = false;
  };
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    Step& step = plan.steps[s];
    if (step.kind == StepKind::fused) {
      for (int id : plan.kernels[step.kernel].inputs) need_contiguous(id);
      continue;
    }
    const Node& node = graph.nodes()[step.node];
    if (step.kind == StepKind::view) {
      need_contiguous(node.inputs.at(0));
      strided[node.outputs[0]] = view_may_be_strided(graph, node, probes);
      view_step[node.outputs[0]] = static_cast<int>(s);
      continue;
    }
    if ((step.kind == StepKind::library || step.kind == StepKind::splitting) &&
        !node.op->strided_inputs) {
      for (int id : node.inputs) need_contiguous(id);
    }
  }
}

class MaterializePass final : public Pass {
 public:
  std::string_view name() const override { return "materialize"; }
  void run(CompiledPlan& plan, const PassContext&) const override { materialize_views(plan); }
};

}  // namespace

TESSERA_REGISTER_PASS(MaterializePass);

}  // namespace tessera
