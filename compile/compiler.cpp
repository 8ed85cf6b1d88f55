#include "compile/compiler.h"

#include <filesystem>
#include <system_error>

#include "compile/codegen/kernel_cache.h"
#include "compile/codegen/measured_choice_files.h"
#include "compile/passes/pass_manager.h"
#include "compile/piecewise_backend.h"

namespace tessera {
namespace {

Device plan_device(const Graph& graph) {
  std::vector<int> placeholders = graph.placeholders();
  return placeholders.empty() ? kCPU : graph.value(placeholders[0]).meta.device;
}

}  // namespace

std::shared_ptr<CompiledPlan> compile_graph(const Graph& graph, const CompilerOptions& options) {
  const CompilationConfig& config = options.config;
  auto plan = std::make_shared<CompiledPlan>();
  plan->graph = graph;
  plan->device = plan_device(graph);
  PassContext context{.config = config,
                      .device = plan->device,
                      .max_dynamic_size = options.max_dynamic_size,
                      .cache_dir = resolve_cache_dir(config.cache_dir)};
  if (!config.dump_dir.empty()) {
    context.dump_folder = std::filesystem::path(config.dump_dir) / options.name;
    // A fresh folder: what an earlier compile of this function wrote there would mislead.
    std::error_code ignored;
    if (!options.name.empty()) std::filesystem::remove_all(context.dump_folder, ignored);
  }
  // The kernels' measured choices (which GEMM path each shape takes) persist beside the kernels.
  use_measured_choice_files(context.cache_dir);
  PassManager(context).run(*plan);
  context.dump("explain.txt", plan->explain());
  return plan;
}

CompileBackend make_compiled_backend(CompilerOptions options, PlanCallback on_plan,
                                     PiecewiseBackendCallback on_backend) {
  return [options, on_plan, on_backend](const Graph& graph,
                                        std::span<const Tensor>) -> CompiledCallable {
    std::shared_ptr<const CompiledPlan> plan = compile_graph(graph, options);
    if (on_plan) on_plan(plan);
    auto backend = std::make_shared<PiecewiseBackend>(plan);
    if (on_backend) on_backend(backend);
    return [backend](std::span<const Tensor> inputs) { return backend->run(inputs); };
  };
}

CompileOptions compiled_mode_options(const CompilerOptions& compiler,
                                     std::vector<DynamicDim> dynamic_dims,
                                     CustomOpConfig custom_ops, PlanCallback on_plan,
                                     PiecewiseBackendCallback on_backend) {
  CompileOptions options;
  options.backend = "compiled";
  options.backend_function =
      make_compiled_backend(compiler, std::move(on_plan), std::move(on_backend));
  options.dynamic_dims = std::move(dynamic_dims);
  options.custom_ops = custom_ops_for_passes(custom_ops, compiler.config.pass_config);
  options.recompile_limit = static_cast<int>(compiler.config.recompile_limit);
  return options;
}

}  // namespace tessera
