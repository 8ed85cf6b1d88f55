// Rotary attention: attention(rotary_embedding(positions, q, k, cache), v), where q, k and v are
// the column slices of one qkv tensor in that order (as models/decoder_weights.cpp's split_qkv
// makes them) and nothing else reads the slices or the rotated pair, becomes one
// rotary_attention node (compile/ops/rotary_attention.cpp) over qkv. Its GPU decode kernel
// rotates the query in registers and the step's key as it stages and caches it, so a decode
// step has no rope launch and no copy of q, k and v out of qkv. The pass needs rotary_embedding
// recorded as itself (custom_ops_for_passes keeps it so while tracing); where the config
// disables it by name ("-rotary_embedding") the pass finds nothing.
#include "compile/passes/graph_rewrite.h"
#include "compile/passes/pass.h"

namespace tessera {
namespace {

int producer_of(const Graph& graph, int value, const char* op_name) {
  const int index = graph.value(value).producer;
  if (index < 0) return -1;
  const Node& node = graph.nodes()[index];
  return node.kind == NodeKind::call && node.op->name == op_name ? index : -1;
}

// Whether node `slice` takes columns [start, start + width) of a rank-2 value, which it returns
// in *source.
bool is_column_slice(const Graph& graph, int slice, int64_t start, int64_t width, int* source) {
  if (slice < 0) return false;
  const Node& node = graph.nodes()[slice];
  const TensorMeta& x = graph.value(node.inputs[0]).meta;
  const Attributes& a = node.attributes;
  if (x.rank() != 2 || a.get_int("dim") != 1 || a.get_int("step") != 1 ||
      a.get_int("start") != start || a.get_int("end") != start + width)
    return false;
  *source = node.inputs[0];
  return true;
}

// The rope and the slices feeding attention node `attention`, absorbed into one rotary_attention
// over qkv; or nothing.
std::optional<Replacement> match(const Graph& graph, const ValueUses& uses, int attention) {
  const Node& node = graph.nodes()[attention];
  const int rotary = producer_of(graph, node.inputs[0], "rotary_embedding");
  if (rotary < 0 || producer_of(graph, node.inputs[1], "rotary_embedding") != rotary) return {};
  const Node& rope = graph.nodes()[rotary];
  if (rope.outputs[0] != node.inputs[0] || rope.outputs[1] != node.inputs[1]) return {};
  if (rope.attributes.get_int("head_size") != node.attributes.get_int("head_size")) return {};
  const int64_t head_size = node.attributes.get_int("head_size");
  const int64_t query_width = node.attributes.get_int("num_heads") * head_size;
  const int64_t key_width = node.attributes.get_int("num_kv_heads") * head_size;
  const int query_slice = producer_of(graph, rope.inputs[1], "slice");
  const int key_slice = producer_of(graph, rope.inputs[2], "slice");
  const int value_slice = producer_of(graph, node.inputs[2], "slice");
  int query_source = -1, key_source = -1, value_source = -1;
  if (!is_column_slice(graph, query_slice, 0, query_width, &query_source) ||
      !is_column_slice(graph, key_slice, query_width, key_width, &key_source) ||
      !is_column_slice(graph, value_slice, query_width + key_width, key_width, &value_source) ||
      query_source != key_source || key_source != value_source)
    return {};
  const TensorMeta& qkv = graph.value(query_source).meta;
  if (!qkv.shape[1].is_constant() || qkv.shape[1].constant() != query_width + 2 * key_width)
    return {};
  // Nothing else may read what the fused op leaves unwritten on its fused path.
  if (!uses.only_reader(node.inputs[0], attention) ||
      !uses.only_reader(node.inputs[1], attention) ||
      !uses.only_reader(node.inputs[2], attention) || !uses.only_reader(rope.inputs[1], rotary) ||
      !uses.only_reader(rope.inputs[2], rotary))
    return {};
  Replacement found;
  found.absorbed = {rotary, query_slice, key_slice, value_slice};
  found.op = &OpRegistry::global().get("rotary_attention");
  found.inputs = {rope.inputs[0], query_source, rope.inputs[3]};  // positions, qkv, the cache
  found.attributes = node.attributes;
  found.attributes.set("is_neox", rope.attributes.get_bool("is_neox", true));
  found.output_metas = {graph.value(node.outputs[0]).meta, graph.value(rope.outputs[0]).meta,
                        graph.value(rope.outputs[1]).meta, graph.value(node.inputs[2]).meta};
  return found;
}

class RotaryAttentionPass final : public GraphPass {
 public:
  std::string_view name() const override { return "rotary_attention"; }
  bool applies(const PassContext& context) const override {
    return context.config.pass_config.enable_rotary_attention_fusion;
  }
  void run(CompiledPlan& plan, const PassContext&) const override {
    rewrite_matches(plan.graph, "attention", match);
  }
  // The pass needs rope recorded as itself while tracing.
  std::vector<std::string> matched_custom_ops(const PassConfig& config) const override {
    if (!config.enable_rotary_attention_fusion) return {};
    return {"rotary_embedding"};
  }
};

}  // namespace

TESSERA_REGISTER_PASS(RotaryAttentionPass);

}  // namespace tessera
