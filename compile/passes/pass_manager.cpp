#include "compile/passes/pass_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "runtime/check.h"

namespace tessera {
namespace {

// The pipeline, in order: a new pass is its file (registered by name) and its name here.
constexpr std::string_view kPipeline[] = {
    "cleanup",            // graph: dead code, no-ops, common subexpressions
    "linear_prologue",    // graph: a gated activation into the linear that reads it
    "rotary_attention",   // graph: rope into the attention that reads it
    "split",              // steps: pieces between the splitting ops
    "fuse",               // steps: runs of fusible nodes into row kernels
    "materialize",        // steps: views a reader needs contiguous become copies
    "follows_splitting",  // marks the launches right after a splitting op
    "weight_prefetch",    // marks each GEMM with the next GEMM's weight (CUDA)
    "memory_plan",        // arena offsets
    "codegen",            // the fused kernels generated, compiled and loaded
};

// Every registered pass, in the pipeline's order.
std::vector<const Pass*> pipeline() {
  const PassRegistry& registry = PassRegistry::global();
  TESSERA_CHECK(registry.size() == std::size(kPipeline),
                "{} passes are registered, {} in the pipeline: a pass lacks its line in "
                "compile/passes/pass_manager.cpp",
                registry.size(), std::size(kPipeline));
  std::vector<const Pass*> passes;
  for (std::string_view name : kPipeline) passes.push_back(&registry.get(name));
  return passes;
}

}  // namespace

PassManager::PassManager(const PassContext& context, const std::vector<std::string>& only)
    : context_(context) {
  for (const std::string& name : only) PassRegistry::global().get(name);  // names a typo
  for (const Pass* pass : pipeline()) {
    const bool chosen =
        only.empty() || std::find(only.begin(), only.end(), pass->name()) != only.end();
    if (chosen && pass->applies(context_)) passes_.push_back(pass);
  }
}

std::vector<std::string> PassManager::names() const {
  std::vector<std::string> names;
  for (const Pass* pass : passes_) names.emplace_back(pass->name());
  return names;
}

void PassManager::run(CompiledPlan& plan) const {
  using Clock = std::chrono::steady_clock;
  context_.dump("00-traced.txt", plan.graph.str());
  for (size_t i = 0; i < passes_.size(); ++i) {
    const Pass& pass = *passes_[i];
    const auto start = Clock::now();
    pass.run(plan, context_);
    plan.timings.push_back(
        {std::string(pass.name()),
         std::chrono::duration<double, std::milli>(Clock::now() - start).count()});
    // The text only when it is written: a large graph's is costly.
    if (!context_.dump_folder.empty())
      context_.dump(fmt::format("{:02}-{}.txt", i + 1, pass.name()), pass.result_text(plan));
  }
}

CustomOpConfig custom_ops_for_passes(const CustomOpConfig& custom_ops, const PassConfig& config) {
  CustomOpConfig traced = custom_ops;
  for (const Pass* pass : pipeline())
    for (const std::string& op : pass->matched_custom_ops(config)) traced = traced.with_enabled(op);
  return traced;
}

}  // namespace tessera
