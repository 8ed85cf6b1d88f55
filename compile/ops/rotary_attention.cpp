// rotary_attention: rotary_embedding and attention as one splitting op over the fused qkv
// projection's rows. Model code never calls it: the rotary-attention pass
// (compile/passes/rotary_attention.cpp) puts it where the query and key that attention reads
// come from rotary_embedding alone and all three are column slices of one [T, (Hq + 2 Hk) D]
// tensor, so that a GPU decode step rotates the query and the step's key inside its attention
// kernel instead of in a launch of its own (kernels/cuda/attention/attention.cu).
//
// Outputs: the attention's [T, Hq D], then room for the rotated query, the rotated key and the
// value as contiguous rows, for the kernels that run rope and attention apart and need them
// (kernels/rotary_attention.h). A kernel may leave any of the three unwritten (the fused decode
// kernel writes none, the GPU's apart path only the rotated pair), which is why the pass makes
// this op only where nothing else reads them.
#include "kernels/rotary_attention.h"
#include "compile/ir/op_registry.h"
#include "compile/ops/meta_helpers.h"
#include "compile/ops/ops.h"
#include "compile/trace/dispatch.h"
#include "runtime/check.h"

namespace tessera {
namespace {

OpDef rotary_attention_op() {
  OpDef op;
  op.name = "rotary_attention";
  op.kind = OpKind::splitting;
  op.splits_as = "attention";
  op.input_names = {"positions", "qkv", "cos_sin_cache"};
  op.attributes = {{"layer", std::nullopt},        {"num_heads", std::nullopt},
                   {"num_kv_heads", std::nullopt}, {"head_size", std::nullopt},
                   {"scale", std::nullopt},        {"sliding_window", int64_t{0}},
                   {"logit_softcap", 0.0},         {"is_neox", true}};
  op.doc =
      "attention(rotary_embedding(positions, q, k, cos_sin_cache), v) for q, k, v the column "
      "slices of qkv [T, (Hq + 2 Hk) * head_size] -> (out [T, Hq * head_size], rotated q, "
      "rotated k, v)";
  op.meta = [](const MetaArgs& args) {
    const QkvWidths width = qkv_widths(args.attributes);
    require_rank(args, 1, 2);
    require_float(args, 1);
    const TensorMeta& qkv = args.input(1);
    if (!sizes_equal(qkv.shape[1], width.query + 2 * width.key, "qkv width"))
      throw_argument_error(args, 1,
                           fmt::format("must have {} columns (query, key and value heads x "
                                       "head_size)",
                                       width.query + 2 * width.key));
    TensorMeta query = qkv, key = qkv;
    query.shape[1] = width.query;
    key.shape[1] = width.key;
    // The two ops' own checks, on the slices they would see.
    const OpDef& rotary = OpRegistry::global().get("rotary_embedding");
    const std::vector<TensorMeta> rotary_inputs{args.input(0), query, key, args.input(2)};
    const Attributes rotary_attrs = rotary_embedding_attributes(args.attributes);
    rotary.meta(MetaArgs{rotary, rotary_inputs, rotary_attrs});
    const OpDef& attention = OpRegistry::global().get("attention");
    const std::vector<TensorMeta> attention_inputs{query, key, key};
    const Attributes attention_attrs = attention_attributes(args.attributes);
    std::vector<TensorMeta> outputs =
        attention.meta(MetaArgs{attention, attention_inputs, attention_attrs});
    return std::vector<TensorMeta>{outputs.at(0), query, key, key};
  };
  op.decompose = [](std::span<const Tensor> inputs, const Attributes& attributes) {
    const QkvWidths width = qkv_widths(attributes);
    const Tensor& qkv = inputs[1];
    const Tensor query = ops::slice(qkv, -1, 0, width.query);
    const Tensor key = ops::slice(qkv, -1, width.query, width.query + width.key);
    const Tensor value =
        ops::contiguous(ops::slice(qkv, -1, width.query + width.key, width.query + 2 * width.key));
    auto [rotated_query, rotated_key] =
        ops::rotary_embedding(inputs[0], query, key, inputs[2], attributes.get_int("head_size"),
                              attributes.get_bool("is_neox", true));
    const Tensor out = call_op("attention", std::vector<Tensor>{rotated_query, rotated_key, value},
                               attention_attributes(attributes))[0];
    return std::vector<Tensor>{out, rotated_query, rotated_key, value};
  };
  return op;
}

TESSERA_REGISTER_OP(rotary_attention_op());

}  // namespace
}  // namespace tessera
