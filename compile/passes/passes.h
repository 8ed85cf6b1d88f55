// The compile passes, in the order compile_graph runs them (compile/compiler.h). Each takes the
// plan so far and rewrites or annotates it; each can dump its result (compilation.dump_dir).
//
// The custom-op config is applied while tracing, as vLLM's CustomOp dispatch does: a disabled
// custom op is recorded as its decomposition (compile/tracer.cpp), so no pass is needed for it.
// Composite primitives (softmax) need no decomposition pass either: their row lowering
// (OpDef::row_lowering) writes them as reductions plus pointwise math. The passes ask the OpDef
// what an op is (kind, is_identity, row_lowering), never a list of names.
#pragma once

#include "compile/compiled_plan.h"
#include "compile/custom_op_config.h"

namespace tessera {

// Dead code, no-op reshapes/casts/slices/contiguous, and common subexpressions.
void cleanup(Graph& graph, const PassConfig& config);
// Replaces each gated activation read only by a linear with one <activation>_and_mul_linear
// node.
void fuse_linear_prologues(Graph& graph, const PassConfig& config);
// The custom ops the enabled passes match, enabled for tracing (unless the list disables one by
// name): rotary_embedding for the rotary-attention pass.
CustomOpConfig custom_ops_for_passes(const CustomOpConfig& custom_ops, const PassConfig& config);
// Replaces each attention whose query and key come from rotary_embedding alone, all three
// column slices of one qkv tensor, with one rotary_attention node.
void fuse_rotary_attention(Graph& graph, const PassConfig& config);
// Orders the nodes into steps: views, library kernels, splitting ops (piece boundaries).
std::vector<Step> split_into_pieces(const Graph& graph,
                                    const std::vector<std::string>& splitting_ops, int* num_pieces);
// Groups runs of fusible nodes within each piece into fused kernels.
void fuse(CompiledPlan& plan, bool enable_fusion);
// Turns view steps into copy steps where a reader needs contiguous memory the view may not have,
// or where the view itself would have to copy; needs plan.max_sizes.
void materialize_views(CompiledPlan& plan);
// Marks each GEMM step (an op with a streamed weight) with the constant weight of the next GEMM
// step, for its kernel to prefetch into the device's cache (Step::prefetch).
void plan_weight_prefetch(CompiledPlan& plan, const PassConfig& config);
// Marks the steps that launch right after a splitting op's kernels (Step::follows_splitting_op).
void mark_steps_following_splitting_ops(CompiledPlan& plan);
// Arena offsets for every materialized value and every graph input, by liveness, at the largest
// sizes.
void plan_memory(CompiledPlan& plan);

}  // namespace tessera
