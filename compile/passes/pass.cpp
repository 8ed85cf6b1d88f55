#include "compile/passes/pass.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>

#include "runtime/check.h"

namespace tessera {

void PassContext::dump(const std::string& relative, const std::string& text) const {
  if (dump_folder.empty()) return;
  const std::filesystem::path path = dump_folder / relative;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string Pass::result_text(const CompiledPlan& plan) const {
  return steps_text(plan);
}

std::string steps_text(const CompiledPlan& plan) {
  std::string out;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::fused) {
      const FusedKernel& kernel = plan.kernels[step.kernel];
      out += fmt::format("piece {}: fused {} ({} ops, rows {})\n", step.piece, kernel.name,
                         kernel.nodes.size(), kernel.rows.str());
      continue;
    }
    const Node& node = plan.graph.nodes()[step.node];
    out += fmt::format("piece {}: {} {} -> {}\n", step.piece, step_kind_name(step.kind),
                       node.op->name, plan.graph.value(node.outputs[0]).meta.str());
  }
  return out;
}

PassRegistry& PassRegistry::global() {
  static PassRegistry registry;
  return registry;
}

bool PassRegistry::add(std::unique_ptr<Pass> pass) {
  for (const auto& registered : passes_)
    TESSERA_CHECK(registered->name() != pass->name(), "pass '{}' is registered twice",
                  pass->name());
  passes_.push_back(std::move(pass));
  return true;
}

const Pass& PassRegistry::get(std::string_view name) const {
  std::vector<std::string_view> names;
  for (const auto& pass : passes_) {
    if (pass->name() == name) return *pass;
    names.push_back(pass->name());
  }
  throw Error(fmt::format("unknown compile pass '{}'; registered passes: {}", name,
                          fmt::join(names, ", ")));
}

}  // namespace tessera
