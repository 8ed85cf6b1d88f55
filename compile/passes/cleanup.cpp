// Cleanup: drops no-op views and casts, merges identical computations, removes dead code.
// Rebuilds the graph with renumbered values; splitting ops (attention writes the KV cache) are
// never removed.
#include <map>
#include <set>

#include "compile/passes/pass.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// True when the node returns its input unchanged (the value, not just the numbers).
bool is_noop(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::call || node.inputs.empty() || !node.op->is_identity) return false;
  const Node& producer = graph.nodes()[graph.value(node.inputs[0]).producer];
  IdentityQuery query{graph.value(node.inputs[0]).meta, graph.value(node.outputs[0]).meta,
                      node.attributes,
                      producer.kind == NodeKind::call && producer.op->kind == OpKind::view};
  return node.op->is_identity(query);
}

void cleanup(Graph& graph, const PassConfig& config) {
  // Liveness from the outputs backwards: what an output or a splitting op needs.
  std::vector<bool> live_value(graph.num_values(), false);
  std::vector<bool> live_node(graph.nodes().size(), false);
  for (size_t i = graph.nodes().size(); i-- > 0;) {
    const Node& node = graph.nodes()[i];
    bool live = node.kind == NodeKind::output ||
                (node.kind == NodeKind::call && node.op->kind == OpKind::splitting) ||
                node.kind == NodeKind::placeholder;
    for (int id : node.outputs) live = live || live_value[id];
    if (!live) continue;
    live_node[i] = true;
    for (int id : node.inputs) live_value[id] = true;
  }

  Graph rebuilt;
  std::vector<int> remap(graph.num_values(), -1);
  std::map<std::string, std::vector<int>> seen;  // CSE key -> outputs in the new graph
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    if (!live_node[i]) continue;
    std::vector<int> inputs = Graph::remapped(node.inputs, remap);
    if (node.kind != NodeKind::call) {
      rebuilt.copy_node(graph, node, std::move(inputs), remap);
      continue;
    }
    if (config.enable_noop_elimination && is_noop(graph, node)) {
      remap[node.outputs[0]] = inputs[0];
      continue;
    }
    std::string key;
    if (config.enable_cse && node.op->kind != OpKind::splitting) {
      key = fmt::format("{}({})[{}]", node.op->name, fmt::join(inputs, ","), node.attributes.str());
      auto it = seen.find(key);
      if (it != seen.end()) {
        for (size_t o = 0; o < node.outputs.size(); ++o) remap[node.outputs[o]] = it->second[o];
        continue;
      }
    }
    rebuilt.copy_node(graph, node, std::move(inputs), remap);
    if (!key.empty()) {
      std::vector<int>& outputs = seen[key];
      for (int id : node.outputs) outputs.push_back(remap[id]);
    }
  }
  graph = std::move(rebuilt);
}

class CleanupPass final : public GraphPass {
 public:
  std::string_view name() const override { return "cleanup"; }
  void run(CompiledPlan& plan, const PassContext& context) const override {
    cleanup(plan.graph, context.config.pass_config);
  }
};

}  // namespace

TESSERA_REGISTER_PASS(CleanupPass);

}  // namespace tessera
