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
#include <set>

#include "compile/passes/passes.h"
#include "compile/passes/value_uses.h"

namespace tessera {
namespace {

struct Match {
  std::vector<int> absorbed;  // the activation's nodes (they disappear)
  int gated_input = -1;       // x [..., 2d]
  const OpDef* fused = nullptr;
  Attributes attributes;  // the activation's
};

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

// The activation feeding linear node `linear` (its input 0), or nothing.
std::optional<Match> match(const Graph& graph, const ValueUses& uses, int linear) {
  const Node& node = graph.nodes()[linear];
  const int activated = node.inputs[0];
  const Node* producer = producer_call(graph, activated);
  if (producer == nullptr || !uses.only_reader(activated, linear)) return std::nullopt;
  const OpRegistry& registry = OpRegistry::global();
  Match found;
  if ((found.fused = registry.find(producer->op->name + "_linear")) != nullptr) {
    // A gated custom op (silu_and_mul) with its fused op (silu_and_mul_linear).
    found.absorbed = {node_index(graph, producer)};
    found.gated_input = producer->inputs[0];
    found.attributes = producer->attributes;
  } else if (producer->op->name == "mul") {
    // mul(act(slice(x, 0, d)), slice(x, d, 2d))
    const int mul = node_index(graph, producer);
    const Node* act = producer_call(graph, producer->inputs[0]);
    const Node* up = producer_call(graph, producer->inputs[1]);
    if (act == nullptr ||
        (found.fused = registry.find(act->op->name + "_and_mul_linear")) == nullptr)
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
    found.gated_input = gate_source;
    found.attributes = act->attributes;
  } else {
    return std::nullopt;
  }
  return found;
}

}  // namespace

void fuse_linear_prologues(Graph& graph, const PassConfig& config) {
  if (!config.enable_linear_prologue_fusion) return;
  const ValueUses uses(graph);
  std::vector<std::optional<Match>> at_linear(graph.nodes().size());
  std::set<int> absorbed;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    if (node.kind != NodeKind::call || node.op->name != "linear") continue;
    at_linear[i] = match(graph, uses, static_cast<int>(i));
    if (!at_linear[i]) continue;
    absorbed.insert(at_linear[i]->absorbed.begin(), at_linear[i]->absorbed.end());
  }
  if (absorbed.empty()) return;

  // Rebuild in order: the absorbed nodes vanish, each matched linear becomes the fused node
  // (its inputs, x and the weights, are defined before the activation was).
  Graph rebuilt;
  std::vector<int> remap(graph.num_values(), -1);
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    if (absorbed.count(static_cast<int>(i))) continue;
    std::vector<int> sources = node.inputs;
    if (at_linear[i]) sources[0] = at_linear[i]->gated_input;  // in place of the activation
    std::vector<int> inputs = Graph::remapped(sources, remap);
    if (!at_linear[i]) {
      rebuilt.copy_node(graph, node, std::move(inputs), remap);
      continue;
    }
    const Match& m = *at_linear[i];
    const TensorMeta& out = graph.value(node.outputs[0]).meta;
    const TensorMeta& activated = graph.value(node.inputs[0]).meta;
    remap[node.outputs[0]] = rebuilt.add_call(*m.fused, inputs, m.attributes, {out, activated})[0];
  }
  graph = std::move(rebuilt);
}

}  // namespace tessera
