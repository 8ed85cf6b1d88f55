#include "compile/interpreter.h"

#include "compile/trace/dispatch.h"
#include "runtime/check.h"

namespace tessera {

std::vector<Tensor> interpret_graph(const Graph& graph, std::span<const Tensor> inputs) {
  std::vector<Tensor> values(graph.num_values());
  std::vector<Tensor> arguments;
  for (const Node& node : graph.nodes()) {
    switch (node.kind) {
      case NodeKind::placeholder:
        TESSERA_CHECK(
            node.input_index >= 0 && static_cast<size_t>(node.input_index) < inputs.size(),
            "placeholder {} has no input", node.input_index);
        values[node.outputs[0]] = inputs[node.input_index];
        break;
      case NodeKind::constant:
        values[node.outputs[0]] = node.constant;
        break;
      case NodeKind::call: {
        arguments.clear();
        for (int id : node.inputs) arguments.push_back(values[id]);
        std::vector<Tensor> results = run_eager(*node.op, arguments, node.attributes);
        TESSERA_CHECK(results.size() == node.outputs.size(), "op {} returned {} outputs, not {}",
                      node.op->name, results.size(), node.outputs.size());
        for (size_t i = 0; i < results.size(); ++i) values[node.outputs[i]] = std::move(results[i]);
        break;
      }
      case NodeKind::output: {
        std::vector<Tensor> outputs;
        for (int id : node.inputs) outputs.push_back(values[id]);
        return outputs;
      }
    }
  }
  TESSERA_CHECK(false, "graph has no output node");
}

}  // namespace tessera
