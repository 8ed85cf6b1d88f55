#include "compile/compiled_plan.h"

#include <set>

#include "runtime/check.h"

namespace tessera {

const char* step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::view:
      return "view";
    case StepKind::copy:
      return "copy";
    case StepKind::library:
      return "library";
    case StepKind::fused:
      return "fused";
    case StepKind::splitting:
      return "split";
  }
  return "?";
}

size_t CompiledPlan::launches_per_call() const {
  size_t launches = 0;
  for (const Step& step : steps) launches += step.kind != StepKind::view;
  return launches;
}

std::string CompiledPlan::explain() const {
  std::string out;
  std::vector<std::string> splits;
  for (const Step& step : steps)
    if (step.kind == StepKind::splitting) splits.push_back(graph.nodes()[step.node].op->name);
  out += fmt::format("{} pieces, {} splitting ops ({})\n", num_pieces, splits.size(),
                     splits.empty() ? "none" : splits.front());
  std::set<std::string> unique_sources;
  std::set<std::string> unique_pieces;
  std::string piece_signature;
  int current = -1;
  auto close_piece = [&] {
    if (current >= 0) unique_pieces.insert(piece_signature);
    piece_signature.clear();
  };
  for (const Step& step : steps) {
    if (step.piece != current && step.kind != StepKind::splitting) {
      close_piece();
      current = step.piece;
      out += fmt::format("piece {}:\n", current);
    }
    if (step.kind == StepKind::fused) {
      const FusedKernel& kernel = kernels[step.kernel];
      std::vector<std::string> ops;
      for (int n : kernel.nodes) ops.push_back(graph.nodes()[n].op->name);
      out += fmt::format("  fused {} [{} ops: {}] rows {}\n", kernel.name, ops.size(),
                         fmt::join(ops, " "), kernel.rows.str());
      unique_sources.insert(kernel.source);
      piece_signature +=
          kernel.source.empty() ? fmt::format("{}", fmt::join(ops, " ")) : kernel.source;
    } else {
      const Node& node = graph.nodes()[step.node];
      if (step.kind == StepKind::splitting) {
        close_piece();
        current = -1;
        out += fmt::format("-- split: {} (layer {})\n", node.op->name,
                           node.attributes.get_int("layer", -1));
        continue;
      }
      out += fmt::format("  {} {} -> {}{}{}\n", step_kind_name(step.kind), node.op->name,
                         graph.value(node.outputs[0]).meta.str(),
                         step.follows_splitting_op ? " (follows a splitting op)" : "",
                         step.prefetch < 0
                             ? ""
                             : fmt::format(" (prefetches {})", graph.value(step.prefetch).name));
      piece_signature +=
          fmt::format("{}{};", node.op->name, graph.value(node.outputs[0]).meta.str());
    }
  }
  close_piece();
  out += fmt::format("fused kernels: {} ({} unique sources); unique pieces: {} of {}\n",
                     kernels.size(), unique_sources.size(), unique_pieces.size(), num_pieces);
  size_t graph_ops = 0;
  for (const Node& node : graph.nodes())
    graph_ops += node.kind == NodeKind::call && node.op->eager == nullptr;
  out += fmt::format(
      "launches per forward: {} (op by op: {}); arena {:.2f} MiB ({:.2f} MiB without reuse)\n",
      launches_per_call(), graph_ops, memory.arena_bytes / 1048576.0,
      memory.unplanned_bytes / 1048576.0);
  out +=
      fmt::format("kernels compiled: {}, from cache: {}\n", kernels_compiled, kernels_from_cache);
  if (!timings.empty()) out += "time per pass:\n";
  for (const PassTiming& timing : timings)
    out += fmt::format("  {:<18} {:8.1f} ms\n", timing.pass, timing.milliseconds);
  return out;
}

}  // namespace tessera
