// Codegen: each fused kernel's row body rendered as source for the plan's device, compiled through
// the on-disk kernel cache (or found there) and loaded, by the device's codegen target
// (compile/codegen/codegen_target.h). Each source is dumped as kernels/<name>.<extension>.
#include <spdlog/spdlog.h>

#include "compile/codegen/codegen_target.h"
#include "compile/passes/pass.h"

namespace tessera {
namespace {

void record_cache_stats(CompiledPlan& plan, const KernelCacheStats& stats,
                        const std::string& directory) {
  plan.kernels_compiled = stats.compiled;
  plan.kernels_from_cache = stats.disk_hits + stats.memory_hits;
  spdlog::info("compiled {} fused kernels: {} built, {} from the cache ({})", plan.kernels.size(),
               plan.kernels_compiled, plan.kernels_from_cache, directory);
}

class CodegenPass final : public Pass {
 public:
  std::string_view name() const override { return "codegen"; }
  void run(CompiledPlan& plan, const PassContext& context) const override {
    if (plan.kernels.empty()) return;
    std::unique_ptr<CodegenTarget> target = make_codegen_target(plan.device, context.cache_dir);
    for (FusedKernel& kernel : plan.kernels) {
      RowKernelBody body = build_row_kernel_body(plan.graph, kernel);
      kernel.source = target->render(body, kernel.name);
      context.dump("kernels/" + kernel.name + "." + target->source_extension(), kernel.source);
      kernel.compiled = target->load(kernel.source, kernel.name, body);
    }
    record_cache_stats(plan, target->stats(), target->cache_directory());
  }
  std::string result_text(const CompiledPlan& plan) const override {
    std::string out =
        fmt::format("{} fused kernels: {} built, {} from the cache\n", plan.kernels.size(),
                    plan.kernels_compiled, plan.kernels_from_cache);
    for (const FusedKernel& kernel : plan.kernels) out += kernel.name + "\n";
    return out;
  }
};

}  // namespace

TESSERA_REGISTER_PASS(CodegenPass);

}  // namespace tessera
