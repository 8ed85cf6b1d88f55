// Who reads each value of a graph, and which values it returns: what a pattern-matching pass asks
// before it absorbs a node (an absorbed value must have no other reader).
#pragma once

#include <vector>

#include "compile/ir/graph.h"

namespace tessera {

struct ValueUses {
  std::vector<std::vector<int>> consumers;  // node indices, by value id
  std::vector<bool> returned;

  explicit ValueUses(const Graph& graph)
      : consumers(graph.num_values()), returned(graph.num_values(), false) {
    for (size_t i = 0; i < graph.nodes().size(); ++i)
      for (int id : graph.nodes()[i].inputs) consumers[id].push_back(static_cast<int>(i));
    for (int id : graph.outputs()) returned[id] = true;
  }
  // Whether value `id` is read by node `reader` alone (once) and not returned.
  bool only_reader(int id, int reader) const {
    return !returned[id] && consumers[id].size() == 1 && consumers[id][0] == reader;
  }
};

}  // namespace tessera
