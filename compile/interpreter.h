// Runs a graph node by node with the ops' eager implementations (the `traced` backend, the
// counterpart of aot_eager): for debugging and as the reference a compiled graph must match.
#pragma once

#include <span>
#include <vector>

#include "compile/ir/graph.h"

namespace tessera {

std::vector<Tensor> interpret_graph(const Graph& graph, std::span<const Tensor> inputs);

}  // namespace tessera
