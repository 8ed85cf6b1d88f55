#include "compile/passes/graph_rewrite.h"

#include <set>

#include "runtime/check.h"

namespace tessera {

size_t rewrite_matches(Graph& graph, const std::string& anchor_op, const Matcher& match) {
  const ValueUses uses(graph);
  std::vector<std::optional<Replacement>> at_anchor(graph.nodes().size());
  std::set<int> absorbed;
  size_t matches = 0;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    if (node.kind != NodeKind::call || node.op->name != anchor_op) continue;
    at_anchor[i] = match(graph, uses, static_cast<int>(i));
    if (!at_anchor[i]) continue;
    ++matches;
    absorbed.insert(at_anchor[i]->absorbed.begin(), at_anchor[i]->absorbed.end());
  }
  if (matches == 0) return 0;

  // Rebuild in order: the absorbed nodes vanish, each matched anchor becomes its replacement
  // (whose inputs are defined before the absorbed nodes were).
  Graph rebuilt;
  std::vector<int> remap(graph.num_values(), -1);
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    if (absorbed.count(static_cast<int>(i))) continue;
    if (!at_anchor[i]) {
      rebuilt.copy_node(graph, node, Graph::remapped(node.inputs, remap), remap);
      continue;
    }
    const Replacement& replacement = *at_anchor[i];
    TESSERA_CHECK(replacement.output_metas.size() >= node.outputs.size(),
                  "{} replaces {} with fewer outputs", replacement.op->name, anchor_op);
    const std::vector<int> outputs =
        rebuilt.add_call(*replacement.op, Graph::remapped(replacement.inputs, remap),
                         replacement.attributes, replacement.output_metas);
    for (size_t o = 0; o < node.outputs.size(); ++o) remap[node.outputs[o]] = outputs[o];
  }
  graph = std::move(rebuilt);
  return matches;
}

}  // namespace tessera
