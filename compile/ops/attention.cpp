// attention: the opaque splitting op. Writes this step's K/V into the layer's paged cache and
// attends through block tables; the metadata and caches come from the forward context
// (kernels/attention_metadata.h), so the graph holds only q/k/v and the layer's constants.
#include "compile/ops/meta_helpers.h"
#include "runtime/check.h"

namespace tessera {
namespace {

OpDef attention_op() {
  OpDef op;
  op.name = "attention";
  op.input_names = {"query", "key", "value"};
  op.attributes = {
      {"layer", std::nullopt},        {"num_heads", std::nullopt},
      {"num_kv_heads", std::nullopt}, {"head_size", std::nullopt},
      {"scale", std::nullopt},        {"sliding_window", int64_t{0}},  // 0: every earlier key
      {"logit_softcap", 0.0}};                                         // 0: scores as they are
  op.kind = OpKind::splitting;
  op.doc =
      "paged causal attention of query [T, Hq*D] over the cached and new key/value [T, Hk*D], "
      "optionally within a sliding window and with tanh-softcapped scores";
  op.meta = [](const MetaArgs& args) {
    int64_t heads = args.attributes.get_int("num_heads");
    int64_t kv_heads = args.attributes.get_int("num_kv_heads");
    int64_t head_size = args.attributes.get_int("head_size");
    TESSERA_REQUIRE(heads > 0 && kv_heads > 0 && head_size > 0 && heads % kv_heads == 0,
                    "attention: num_heads ({}) must be a positive multiple of num_kv_heads ({}) "
                    "and head_size ({}) positive",
                    heads, kv_heads, head_size);
    TESSERA_REQUIRE(args.attributes.get_int("sliding_window") >= 0,
                    "attention: sliding_window must be 0 (none) or positive, got {}",
                    args.attributes.get_int("sliding_window"));
    TESSERA_REQUIRE(args.attributes.get_float("logit_softcap") >= 0,
                    "attention: logit_softcap must be 0 (none) or positive, got {}",
                    args.attributes.get_float("logit_softcap"));
    require_float(args, 0);
    for (size_t i = 0; i < 3; ++i) {
      require_rank(args, i, 2);
      require_same_dtype(args, 0, i);
      if (!sizes_equal(args.input(i).shape[0], args.input(0).shape[0], "attention tokens"))
        throw_argument_error(
            args, i, fmt::format("must have the tokens of 'query' ({})", args.input(0).str()));
      int64_t expected = (i == 0 ? heads : kv_heads) * head_size;
      if (!sizes_equal(args.input(i).shape[1], expected, "attention width"))
        throw_argument_error(args, i,
                             fmt::format("must have {} columns (heads x head_size)", expected));
    }
    return std::vector<TensorMeta>{args.input(0)};
  };
  return op;
}

TESSERA_REGISTER_OP(attention_op());

}  // namespace
}  // namespace tessera
