// Collectives of tensor parallelism: all_reduce (sum) and all_gather (along dim 0) among the
// ranks of the group this thread runs (runtime/communicator.h). Library ops, not splitting ones
// (as in vLLM): the compiler keeps them inside a piece, and graphs capture them with the rest.
#include "compile/ops/meta_helpers.h"
#include "runtime/check.h"

namespace tessera {
namespace {

OpDef all_reduce_op() {
  OpDef op;
  op.name = "all_reduce";
  op.kind = OpKind::library;
  op.input_names = {"x"};
  op.doc = "the element-wise sum of x over the ranks of the tensor-parallel group";
  op.meta = [](const MetaArgs& args) {
    require_rank_at_least(args, 0, 1);
    return std::vector<TensorMeta>{args.input(0)};
  };
  return op;
}

OpDef all_gather_op() {
  OpDef op;
  op.name = "all_gather";
  op.kind = OpKind::library;
  op.input_names = {"x"};
  // The group's size is an attribute so that the meta function knows the output's rows.
  op.attributes = {{"world_size", std::nullopt}};
  op.doc = "x [n, ...] of every rank stacked in rank order -> [world_size * n, ...]";
  op.meta = [](const MetaArgs& args) {
    require_rank_at_least(args, 0, 1);
    const int64_t world_size = args.attributes.get_int("world_size");
    TESSERA_REQUIRE(world_size >= 1, "all_gather: world_size must be at least 1, got {}",
                    world_size);
    TensorMeta out = args.input(0);
    out.shape[0] = out.shape[0] * SymInt(world_size);
    return std::vector<TensorMeta>{out};
  };
  return op;
}

TESSERA_REGISTER_OP(all_reduce_op());
TESSERA_REGISTER_OP(all_gather_op());

}  // namespace
}  // namespace tessera
