// Linear prologue: a gated activation whose only reader is a linear becomes one
// `<activation>_and_mul_linear` node (compile/ops/activation_and_mul_linear.cpp), whose GPU kernel
// computes the activation while it reads the linear's input: one launch and one pass over the
// gate/up rows fewer per MLP at decode. The activation is found in either form the tracer
// records: the custom op (silu_and_mul, gelu_and_mul) or, when that op is disabled, its
// decomposition mul(act(slice(x, 0, d)), slice(x, d, 2d)) over the last dim. Runs after cleanup
// (which has merged the two slices' twins and dropped dead code) and before the split. The
// fused op is found in the registry by name: <op>_linear for a gated custom op, and
// <activation>_and_mul_linear for a decomposed one, so a gated activation with such an op fuses
// without a change here.
#include "compile/passes/graph_rewrite.h"
#include "compile/passes/pass.h"

namespace tessera {
namespace {

const Node* producer_call(const Graph& graph, int value) {
  const Node& node = graph.nodes()[graph.value(value).producer];
  return node.kind == NodeKind::call ? &node : nullptr;
}

int node_index(const Graph& graph, const Node* node) {
  return static_cast<int>(node - graph.nodes().data());
}

// slice(x, last dim, start, start + width, step 1) with width = half of x's constant last size.
bool is_half_slice(const Graph& graph, const Node* node, int64_t half_index, int* source) {
  if (node == nullptr || node->op->name != "slice") return false;
  const TensorMeta& x = graph.value(node->inputs[0]).meta;
  if (x.rank() < 1 || !x.shape.back().is_constant()) return false;
  const int64_t width = x.shape.back().constant();
  if (width % 2 != 0) return false;
  const int64_t half = width / 2;
  const Attributes& a = node->attributes;
  if (a.get_int("dim") != x.rank() - 1 || a.get_int("step") != 1 ||
      a.get_int("start") != half_index * half || a.get_int("end") != (half_index + 1) * half)
    return false;
  *source = node->inputs[0];
  return true;
}

// The activation feeding linear node `linear` (its input 0), absorbed into the fused op that
// reads the gated input in its place; or nothing.
std::optional<Replacement> match(const Graph& graph, const ValueUses& uses, int linear) {
  const Node& node = graph.nodes()[linear];
  const int activated = node.inputs[0];
  const Node* producer = producer_call(graph, activated);
  if (producer == nullptr || !uses.only_reader(activated, linear)) return std::nullopt;
  const OpRegistry& registry = OpRegistry::global();
  Replacement found;
  int gated_input = -1;  // x [..., 2d]
  if ((found.op = registry.find(producer->op->name + "_linear")) != nullptr) {
    // A gated custom op (silu_and_mul) with its fused op (silu_and_mul_linear).
    found.absorbed = {node_index(graph, producer)};
    gated_input = producer->inputs[0];
    found.attributes = producer->attributes;
  } else if (producer->op->name == "mul") {
    // mul(act(slice(x, 0, d)), slice(x, d, 2d))
    const int mul = node_index(graph, producer);
    const Node* act = producer_call(graph, producer->inputs[0]);
    const Node* up = producer_call(graph, producer->inputs[1]);
    if (act == nullptr || (found.op = registry.find(act->op->name + "_and_mul_linear")) == nullptr)
      return std::nullopt;
    const Node* gate = producer_call(graph, act->inputs[0]);
    int gate_source = -1, up_source = -1;
    if (!is_half_slice(graph, gate, 0, &gate_source) || !is_half_slice(graph, up, 1, &up_source) ||
        gate_source != up_source)
      return std::nullopt;
    if (!uses.only_reader(producer->inputs[0], mul) ||
        !uses.only_reader(act->inputs[0], node_index(graph, act)) ||
        !uses.only_reader(producer->inputs[1], mul))
      return std::nullopt;
    // The same dtype throughout: the fused op computes in f32 and rounds once to x's dtype.
    const DType dtype = graph.value(gate_source).meta.dtype;
    for (int id : {act->outputs[0], activated})
      if (graph.value(id).meta.dtype != dtype) return std::nullopt;
    found.absorbed = {node_index(graph, gate), node_index(graph, up), node_index(graph, act), mul};
    gated_input = gate_source;
    found.attributes = act->attributes;
  } else {
    return std::nullopt;
  }
  found.inputs = node.inputs;
  found.inputs[0] = gated_input;  // in place of the activation
  found.output_metas = {graph.value(node.outputs[0]).meta, graph.value(activated).meta};
  return found;
}

class LinearProloguePass final : public GraphPass {
 public:
  std::string_view name() const override { return "linear_prologue"; }
  bool applies(const PassContext& context) const override {
    return context.config.pass_config.enable_linear_prologue_fusion;
  }
  void run(CompiledPlan& plan, const PassContext&) const override {
    rewrite_matches(plan.graph, "linear", match);
  }
};

}  // namespace

TESSERA_REGISTER_PASS(LinearProloguePass);

}  // namespace tessera
