// rotary_embedding: rotates query and key by position (RoPE), neox style (the two halves of each
// head's rotary dims) or gptj style (adjacent pairs). cos_sin_cache [max_position, rot_dim] holds
// cos in its first half and sin in its second, as in vLLM; rot_dim <= head_size, and dims past
// rot_dim pass through.
#include "compile/ops/meta_helpers.h"
#include "compile/ops/ops.h"
#include "compile/trace/fake_tensor.h"
#include "runtime/check.h"

namespace tessera {
namespace {

void check_heads(const MetaArgs& args, size_t index, int64_t head_size) {
  require_rank(args, index, 2);
  const SymInt& width = args.input(index).shape[1];
  if (!sizes_equal(mod(width, head_size), 0, "head size divides the width")) {
    throw_argument_error(args, index,
                         fmt::format("must have a last size divisible by head_size {}", head_size));
  }
}

OpDef rotary_embedding_op() {
  OpDef op;
  op.name = "rotary_embedding";
  op.kind = OpKind::library;
  op.input_names = {"positions", "query", "key", "cos_sin_cache"};
  op.attributes = {{"head_size", std::nullopt}, {"is_neox", true}};
  op.custom = true;
  op.doc = "RoPE on query [T, Hq*head_size] and key [T, Hk*head_size] at positions [T]";
  op.meta = [](const MetaArgs& args) {
    int64_t head_size = args.attributes.get_int("head_size");
    TESSERA_REQUIRE(head_size > 0 && head_size % 2 == 0,
                    "rotary_embedding: head_size must be positive and even, got {}", head_size);
    require_dtype_in(args, 0, {DType::i32, DType::i64});
    require_rank(args, 0, 1);
    require_float(args, 1);
    require_same_dtype(args, 1, 2);
    require_float(args, 3);
    require_rank(args, 3, 2);
    check_heads(args, 1, head_size);
    check_heads(args, 2, head_size);
    const SymInt& rot_dim = args.input(3).shape[1];
    if (!(sizes_equal(mod(rot_dim, 2), 0, "rotary dims even") &&
          (rot_dim <= SymInt(head_size)).guard_bool("rotary dims fit the head"))) {
      throw_argument_error(args, 3,
                           fmt::format("must have an even number of rotary dims <= "
                                       "head_size {}",
                                       head_size));
    }
    for (size_t index : {size_t{1}, size_t{2}}) {
      if (!sizes_equal(args.input(index).shape[0], args.input(0).shape[0], "tokens match")) {
        throw_argument_error(args, index,
                             fmt::format("must have one row per position of "
                                         "'positions' ({})",
                                         args.input(0).str()));
      }
    }
    return std::vector<TensorMeta>{args.input(1), args.input(2)};
  };
  op.decompose = [](std::span<const Tensor> inputs, const Attributes& attributes) {
    const Tensor& cache = inputs[3];
    int64_t head_size = attributes.get_int("head_size");
    bool is_neox = attributes.get_bool("is_neox", true);
    int64_t rot_dim = sym_size(cache, 1).guard_int("rotary dims");
    int64_t half = rot_dim / 2;
    DType dtype = inputs[1].dtype();
    Tensor cos_sin = ops::embedding(cache, inputs[0]);  // [T, rot_dim]
    Tensor cos = ops::cast(ops::reshape(ops::slice(cos_sin, -1, 0, half), {-1, 1, half}), dtype);
    Tensor sin =
        ops::cast(ops::reshape(ops::slice(cos_sin, -1, half, rot_dim), {-1, 1, half}), dtype);
    auto rotate = [&](const Tensor& flat) {
      int64_t heads = sym_size(flat, 1).guard_int("heads") / head_size;
      Tensor x = ops::reshape(flat, {-1, heads, head_size});
      Tensor x1 = is_neox ? ops::slice(x, -1, 0, half) : ops::slice(x, -1, 0, rot_dim, 2);
      Tensor x2 = is_neox ? ops::slice(x, -1, half, rot_dim) : ops::slice(x, -1, 1, rot_dim, 2);
      Tensor out1 = ops::sub(ops::mul(x1, cos), ops::mul(x2, sin));
      Tensor out2 = ops::add(ops::mul(x2, cos), ops::mul(x1, sin));
      Tensor rotated;
      if (is_neox) {
        std::vector<Tensor> halves{out1, out2};
        rotated = ops::cat(halves, -1);
      } else {
        std::vector<Tensor> pairs{ops::reshape(out1, {-1, heads, half, 1}),
                                  ops::reshape(out2, {-1, heads, half, 1})};
        rotated = ops::reshape(ops::cat(pairs, -1), {-1, heads, rot_dim});
      }
      if (rot_dim < head_size) {
        std::vector<Tensor> parts{rotated, ops::slice(x, -1, rot_dim, head_size)};
        rotated = ops::cat(parts, -1);
      }
      return ops::reshape(rotated, {-1, heads * head_size});
    };
    return std::vector<Tensor>{rotate(inputs[1]), rotate(inputs[2])};
  };
  return op;
}

TESSERA_REGISTER_OP(rotary_embedding_op());

}  // namespace
}  // namespace tessera
