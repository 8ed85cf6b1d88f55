// Fuse: within each piece, a run of consecutive fusible nodes (ops with a row lowering) that share
// their row count (dim 0) becomes one row kernel. A run ends at a library op (GEMM, a custom op's
// own kernel) or a splitting op, so kernels and library calls alternate in program order and no
// cycle can form. Views inside a run are folded into the kernel's index arithmetic; outside, they
// stay aliases.
#include <spdlog/spdlog.h>

#include <set>

#include "compile/codegen/codegen_target.h"
#include "compile/codegen/row_lowering.h"
#include "compile/passes/pass.h"
#include "runtime/check.h"

namespace tessera {
namespace {

bool all_float(const Graph& graph, const std::vector<int>& ids) {
  for (int id : ids)
    if (!is_floating(graph.value(id).meta.dtype)) return false;
  return true;
}

// Whether the node can live in a row kernel whose rows are `rows` (dim 0 of every value): one
// float output with those rows, and its op's row lowering accepts it.
bool fits_row_kernel(const Graph& graph, const Node& node, const SymInt& rows) {
  const RowLowering& lowering = node.op->row_lowering;
  if (!lowering.accepts || node.outputs.size() != 1) return false;
  const TensorMeta& out = graph.value(node.outputs[0]).meta;
  if (out.rank() < 1 || !out.shape[0].same_as(rows) || !all_float(graph, node.outputs))
    return false;
  std::vector<TensorMeta> inputs;
  std::vector<bool> constant_inputs;
  for (int id : node.inputs) {
    inputs.push_back(graph.value(id).meta);
    constant_inputs.push_back(graph.nodes()[graph.value(id).producer].kind == NodeKind::constant);
  }
  return lowering.accepts(RowCandidate{inputs, out, node.attributes, rows, constant_inputs});
}

// Closes a run: its materialized values are those used outside it or returned.
void close_run(CompiledPlan& plan, std::vector<int>& run_steps, std::vector<Step>& out_steps,
               const std::vector<std::vector<int>>& consumers) {
  const Graph& graph = plan.graph;
  bool has_compute = false;
  for (int s : run_steps) has_compute = has_compute || plan.steps[s].kind != StepKind::view;
  if (!has_compute || run_steps.empty()) {  // views alone stay aliases
    for (int s : run_steps) out_steps.push_back(plan.steps[s]);
    run_steps.clear();
    return;
  }
  FusedKernel kernel;
  std::set<int> members, defined;
  for (int s : run_steps) {
    members.insert(plan.steps[s].node);
    for (int id : graph.nodes()[plan.steps[s].node].outputs) defined.insert(id);
  }
  std::set<int> inputs;
  for (int s : run_steps) {
    const Node& node = graph.nodes()[plan.steps[s].node];
    kernel.nodes.push_back(plan.steps[s].node);
    for (int id : node.inputs)
      if (!defined.count(id)) inputs.insert(id);
  }
  const std::vector<int>& graph_outputs = graph.outputs();
  for (int s : run_steps) {
    for (int id : graph.nodes()[plan.steps[s].node].outputs) {
      bool needed =
          std::find(graph_outputs.begin(), graph_outputs.end(), id) != graph_outputs.end();
      for (int consumer : consumers[id]) needed = needed || !members.count(consumer);
      if (needed) kernel.outputs.push_back(id);
    }
  }
  if (kernel.outputs.empty()) {
    for (int s : run_steps) {
      Step step = plan.steps[s];
      if (step.kind != StepKind::view) step.kind = StepKind::library;
      out_steps.push_back(step);
    }
    run_steps.clear();
    return;
  }
  kernel.inputs.assign(inputs.begin(), inputs.end());
  kernel.rows = graph.value(kernel.outputs[0]).meta.shape[0];
  const Node& first = graph.nodes()[kernel.nodes.front()];
  kernel.name = fmt::format("fused_{}_{}", plan.kernels.size(), first.op->name);
  Step step;
  step.kind = StepKind::fused;
  step.kernel = static_cast<int>(plan.kernels.size());
  step.piece = plan.steps[run_steps.front()].piece;
  plan.kernels.push_back(std::move(kernel));
  out_steps.push_back(step);
  run_steps.clear();
}

void fuse(CompiledPlan& plan) {
  const Graph& graph = plan.graph;
  std::vector<std::vector<int>> consumers(graph.num_values());
  for (size_t i = 0; i < graph.nodes().size(); ++i)
    for (int id : graph.nodes()[i].inputs) consumers[id].push_back(static_cast<int>(i));
  std::vector<Step> fused_steps;
  std::vector<int> run;  // indices into plan.steps
  SymInt run_rows;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const Step& step = plan.steps[s];
    const Node& node = graph.nodes()[step.node];
    bool fusible = (step.kind == StepKind::library || step.kind == StepKind::view) &&
                   static_cast<bool>(node.op->row_lowering.accepts);
    if (fusible) {
      SymInt rows = graph.value(node.outputs[0]).meta.rank() >= 1
                        ? graph.value(node.outputs[0]).meta.shape[0]
                        : SymInt(0);
      if (!run.empty() && !rows.same_as(run_rows)) close_run(plan, run, fused_steps, consumers);
      if (fits_row_kernel(graph, node, rows)) {
        if (run.empty()) run_rows = rows;
        run.push_back(static_cast<int>(s));
        continue;
      }
    }
    // Anything else (including a view that moves dim 0) ends the run: it may read the run's
    // results, which exist only once the kernel ran.
    close_run(plan, run, fused_steps, consumers);
    fused_steps.push_back(step);
  }
  close_run(plan, run, fused_steps, consumers);
  plan.steps = std::move(fused_steps);
}

class FusePass final : public Pass {
 public:
  std::string_view name() const override { return "fuse"; }
  // Fused kernels need the device's code generator (a GPU module registers its own).
  bool applies(const PassContext& context) const override {
    if (!context.config.pass_config.enable_fusion) return false;
    if (has_codegen_target(context.device.type)) return true;
    spdlog::warn("no code generator for {}: compiling without fusion", context.device.str());
    return false;
  }
  void run(CompiledPlan& plan, const PassContext&) const override { fuse(plan); }
};

}  // namespace

TESSERA_REGISTER_PASS(FusePass);

}  // namespace tessera
