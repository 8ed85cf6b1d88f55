// Match and rewrite: what a pattern pass (linear_prologue, rotary_attention) does around its own
// matcher. Each call of an anchor op is offered to the matcher, which may absorb nodes that feed
// it and replace it with one call of another op; the graph is then rebuilt in order, the absorbed
// nodes dropped and each matched anchor replaced. Matches are all found on the graph as it was.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compile/ir/graph.h"
#include "compile/passes/value_uses.h"

namespace tessera {

// What replaces one anchor node: a call of `op` over `inputs` (value ids of the graph as it was,
// all defined before the anchor), whose first outputs stand for the anchor's outputs.
struct Replacement {
  std::vector<int> absorbed{};  // node indices that disappear (their values must have no other use)
  const OpDef* op = nullptr;
  std::vector<int> inputs{};
  Attributes attributes{};
  std::vector<TensorMeta> output_metas{};
};

// The replacement for the anchor node at `anchor`, or nothing when the pattern does not match.
using Matcher = std::function<std::optional<Replacement>(const Graph& graph, const ValueUses& uses,
                                                         int anchor)>;

// Offers every call of op `anchor_op` to `match` and rewrites the matches; returns how many.
size_t rewrite_matches(Graph& graph, const std::string& anchor_op, const Matcher& match);

}  // namespace tessera
