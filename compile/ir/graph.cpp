#include "compile/ir/graph.h"

#include <set>

#include "runtime/check.h"

namespace tessera {

uint64_t fnv1a_hash(std::string_view text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

int Graph::new_value(const TensorMeta& meta, std::string name, int producer) {
  Value value;
  value.id = static_cast<int>(values_.size());
  value.name = name.empty() ? fmt::format("v{}", value.id) : std::move(name);
  value.meta = meta;
  value.producer = producer;
  values_.push_back(std::move(value));
  return values_.back().id;
}

int Graph::add_placeholder(const std::string& name, const TensorMeta& meta, int input_index) {
  Node node;
  node.kind = NodeKind::placeholder;
  node.input_index = input_index;
  node.outputs.push_back(new_value(meta, name, static_cast<int>(nodes_.size())));
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs[0];
}

int Graph::add_constant(const Tensor& tensor) {
  Node node;
  node.kind = NodeKind::constant;
  node.constant = tensor;
  TensorMeta meta{tensor.dtype(), tensor.device(), to_sym_shape(tensor.sizes())};
  node.outputs.push_back(
      new_value(meta, fmt::format("c{}", values_.size()), static_cast<int>(nodes_.size())));
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs[0];
}

std::vector<int> Graph::add_call(const OpDef& op, std::vector<int> inputs, Attributes attributes,
                                 const std::vector<TensorMeta>& output_metas) {
  Node node;
  node.kind = NodeKind::call;
  node.op = &op;
  node.inputs = std::move(inputs);
  node.attributes = std::move(attributes);
  for (const TensorMeta& meta : output_metas)
    node.outputs.push_back(new_value(meta, "", static_cast<int>(nodes_.size())));
  nodes_.push_back(std::move(node));
  return nodes_.back().outputs;
}

void Graph::set_outputs(std::vector<int> value_ids) {
  TESSERA_CHECK(nodes_.empty() || nodes_.back().kind != NodeKind::output, "outputs set twice");
  Node node;
  node.kind = NodeKind::output;
  node.inputs = std::move(value_ids);
  nodes_.push_back(std::move(node));
}

std::vector<int> Graph::remapped(std::span<const int> ids, const std::vector<int>& remap) {
  std::vector<int> out;
  out.reserve(ids.size());
  for (int id : ids) {
    TESSERA_CHECK(remap[id] >= 0, "value {} used before it is defined", id);
    out.push_back(remap[id]);
  }
  return out;
}

void Graph::copy_node(const Graph& from, const Node& node, std::vector<int> inputs,
                      std::vector<int>& remap) {
  switch (node.kind) {
    case NodeKind::placeholder:
      remap[node.outputs[0]] = add_placeholder(from.value(node.outputs[0]).name,
                                               from.value(node.outputs[0]).meta, node.input_index);
      return;
    case NodeKind::constant:
      remap[node.outputs[0]] = add_constant(node.constant);
      return;
    case NodeKind::output:
      set_outputs(std::move(inputs));
      return;
    case NodeKind::call: {
      std::vector<TensorMeta> metas;
      for (int id : node.outputs) metas.push_back(from.value(id).meta);
      std::vector<int> outputs = add_call(*node.op, std::move(inputs), node.attributes, metas);
      for (size_t o = 0; o < outputs.size(); ++o) remap[node.outputs[o]] = outputs[o];
      return;
    }
  }
}

const std::vector<int>& Graph::outputs() const {
  TESSERA_CHECK(!nodes_.empty() && nodes_.back().kind == NodeKind::output, "graph has no outputs");
  return nodes_.back().inputs;
}

std::vector<int> Graph::placeholders() const {
  std::vector<int> ids;
  for (const Node& node : nodes_)
    if (node.kind == NodeKind::placeholder) ids.push_back(node.outputs[0]);
  return ids;
}

size_t Graph::num_calls() const {
  size_t count = 0;
  for (const Node& node : nodes_) count += node.kind == NodeKind::call;
  return count;
}

namespace {

std::string join_values(const Graph& graph, const std::vector<int>& ids,
                        const std::vector<std::string>* names) {
  std::string out;
  for (int id : ids) {
    if (!out.empty()) out += ", ";
    out += "%" + (names ? (*names)[id] : graph.value(id).name);
  }
  return out;
}

// Prints the graph; with `names` the values are renamed (structural form).
std::string print_graph(const Graph& graph, const std::vector<std::string>* names) {
  std::set<std::string> symbols;
  for (size_t id = 0; id < graph.num_values(); ++id)
    for (const SymInt& size : graph.value(static_cast<int>(id)).meta.shape)
      for (const std::string& symbol : size.symbols()) symbols.insert(symbol);
  std::string out = fmt::format("graph({}):\n", fmt::join(symbols, ", "));
  for (const Node& node : graph.nodes()) {
    std::string lhs;
    for (int id : node.outputs) {
      if (!lhs.empty()) lhs += ", ";
      lhs += fmt::format("%{}: {}", names ? (*names)[id] : graph.value(id).name,
                         graph.value(id).meta.str());
    }
    switch (node.kind) {
      case NodeKind::placeholder:
        out += fmt::format("  {} = placeholder[{}]\n", lhs, node.input_index);
        break;
      case NodeKind::constant:
        out += fmt::format("  {} = constant\n", lhs);
        break;
      case NodeKind::call:
        out += fmt::format(
            "  {} = {}({}{}{})\n", lhs, node.op->name, join_values(graph, node.inputs, names),
            node.attributes.empty() || node.inputs.empty() ? "" : ", ", node.attributes.str());
        break;
      case NodeKind::output:
        out += fmt::format("  return ({})\n", join_values(graph, node.inputs, names));
        break;
    }
  }
  return out;
}

}  // namespace

std::string Graph::str() const {
  return print_graph(*this, nullptr);
}

std::string Graph::structural_text() const {
  std::vector<std::string> names(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) names[i] = std::to_string(i);
  return print_graph(*this, &names);
}

uint64_t Graph::hash() const {
  return fnv1a_hash(structural_text());
}

}  // namespace tessera
