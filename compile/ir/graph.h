// The graph IR (the counterpart of torch.fx): an ordered list of nodes over values. Every value
// carries a TensorMeta (dtype, device, symbolic shape). Placeholders are the traced function's
// inputs, constants are real tensors the function closed over (weights), calls apply a registered
// op, and one output node lists the results.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compile/ir/op_registry.h"

namespace tessera {

enum class NodeKind { placeholder, constant, call, output };

struct Value {
  int id = -1;
  std::string name;  // "x", "v3"
  TensorMeta meta;
  int producer = -1;  // index of the node that defines it
};

struct Node {
  NodeKind kind = NodeKind::call;
  const OpDef* op = nullptr;  // for calls
  std::vector<int> inputs;    // value ids
  std::vector<int> outputs;   // value ids
  Attributes attributes;
  int input_index = -1;  // placeholders: position among the function's inputs
  Tensor constant;       // constants: the real tensor
};

class Graph {
 public:
  int add_placeholder(const std::string& name, const TensorMeta& meta, int input_index);
  int add_constant(const Tensor& tensor);
  std::vector<int> add_call(const OpDef& op, std::vector<int> inputs, Attributes attributes,
                            const std::vector<TensorMeta>& output_metas);
  void set_outputs(std::vector<int> value_ids);
  // Appends a copy of `node` of graph `from` reading `inputs` (ids in this graph), and records the
  // ids its outputs get here in `remap` (indexed by `from`'s ids): what a pass that rebuilds a
  // graph does for the nodes it keeps.
  void copy_node(const Graph& from, const Node& node, std::vector<int> inputs,
                 std::vector<int>& remap);
  // The ids that values `ids` of the graph being rebuilt have here, by `remap` (as copy_node
  // fills it); checks that each is already defined.
  static std::vector<int> remapped(std::span<const int> ids, const std::vector<int>& remap);

  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const Value& value(int id) const { return values_.at(static_cast<size_t>(id)); }
  size_t num_values() const { return values_.size(); }
  const std::vector<int>& outputs() const;
  std::vector<int> placeholders() const;  // value ids, in input order
  size_t num_calls() const;

  // Readable form: one line per node with name, op, args, attributes, dtype and symbolic shape.
  std::string str() const;
  // Stable text form (value names renumbered in order, constants by shape only): equal for
  // graphs of the same structure; its hash keys compiled artifacts.
  std::string structural_text() const;
  uint64_t hash() const;

 private:
  int new_value(const TensorMeta& meta, std::string name, int producer);
  std::vector<Node> nodes_;
  std::vector<Value> values_;
};

uint64_t fnv1a_hash(std::string_view text);

}  // namespace tessera
