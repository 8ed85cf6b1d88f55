// Memory plan: every value a step writes (kernel outputs, fused-kernel outputs, copies,
// splitting-op outputs) and every graph input (its static input slot, written before the first
// step) gets an offset in one arena. Sizes are evaluated at the largest symbol values;
// a value lives from its producing step to the last step that reads it (through views too), and
// values whose lifetimes do not overlap share bytes. Graph outputs live to the end.
#include <algorithm>

#include <fmt/format.h>

#include "compile/passes/pass.h"
#include "runtime/check.h"

namespace tessera {
namespace {

constexpr size_t kAlignment = 256;

size_t max_bytes(const TensorMeta& meta, const Bindings& max_sizes) {
  int64_t elements = sym_numel(meta.shape).evaluate(max_sizes);
  size_t bytes = static_cast<size_t>(std::max<int64_t>(elements, 0)) * element_size(meta.dtype);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

void plan_memory(CompiledPlan& plan) {
  const Graph& graph = plan.graph;
  const int end = static_cast<int>(plan.steps.size());
  // The materialized base of every value: a view step aliases its input's base (views folded into
  // a fused kernel that writes them are materialized values of their own).
  std::vector<int> base(graph.num_values());
  for (size_t id = 0; id < base.size(); ++id) base[id] = static_cast<int>(id);
  for (const Step& step : plan.steps) {
    if (step.kind != StepKind::view) continue;
    const Node& node = graph.nodes()[step.node];
    base[node.outputs[0]] = base[node.inputs[0]];
  }
  std::vector<int> birth(graph.num_values(), -1), death(graph.num_values(), -1);
  auto use = [&](int id, int step) { death[base[id]] = std::max(death[base[id]], step); };
  for (int id : graph.placeholders()) birth[id] = 0, death[id] = 0;
  for (int s = 0; s < end; ++s) {
    const Step& step = plan.steps[s];
    std::vector<int> written, read;
    if (step.kind == StepKind::fused) {
      written = plan.kernels[step.kernel].outputs;
      read = plan.kernels[step.kernel].inputs;
    } else {
      const Node& node = graph.nodes()[step.node];
      read = node.inputs;
      if (step.kind != StepKind::view) written = node.outputs;
    }
    for (int id : written) birth[id] = s, death[id] = std::max(death[id], s);
    for (int id : read) use(id, s);
  }
  for (int id : graph.outputs()) use(id, end);

  struct Placed {
    size_t offset, bytes;
    int birth, death;
  };
  std::vector<Placed> placed;
  plan.memory = MemoryPlan{};
  for (size_t id = 0; id < birth.size(); ++id) {
    if (birth[id] < 0) continue;
    size_t bytes = max_bytes(graph.value(static_cast<int>(id)).meta, plan.max_sizes);
    // Lowest offset not overlapping any placed block alive at the same time.
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Placed& p : placed)
      if (!(p.death < birth[id] || death[id] < p.birth))
        busy.push_back({p.offset, p.offset + p.bytes});
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [start, stop] : busy) {
      if (offset + bytes <= start) break;
      offset = std::max(offset, stop);
    }
    placed.push_back({offset, bytes, birth[id], death[id]});
    plan.memory.slots[static_cast<int>(id)] = MemoryPlan::Slot{offset, bytes};
    plan.memory.arena_bytes = std::max(plan.memory.arena_bytes, offset + bytes);
    plan.memory.unplanned_bytes += bytes;
  }
}

class MemoryPlanPass final : public Pass {
 public:
  std::string_view name() const override { return "memory_plan"; }
  void run(CompiledPlan& plan, const PassContext&) const override { plan_memory(plan); }
  std::string result_text(const CompiledPlan& plan) const override {
    return fmt::format("arena {} bytes ({} without reuse), {} buffers\n", plan.memory.arena_bytes,
                       plan.memory.unplanned_bytes, plan.memory.slots.size());
  }
};

}  // namespace

TESSERA_REGISTER_PASS(MemoryPlanPass);

}  // namespace tessera
