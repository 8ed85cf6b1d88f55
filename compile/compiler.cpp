#include "compile/compiler.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "compile/codegen/codegen_target.h"
#include "compile/codegen/kernel_cache.h"
#include "compile/codegen/measured_choice_files.h"
#include "compile/passes/passes.h"
#include "compile/piecewise_backend.h"
#include "runtime/check.h"

namespace tessera {
namespace {

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

void record_cache_stats(CompiledPlan& plan, const KernelCacheStats& stats,
                        const std::string& directory) {
  plan.kernels_compiled = stats.compiled;
  plan.kernels_from_cache = stats.disk_hits + stats.memory_hits;
  if (plan.kernels.empty()) return;
  spdlog::info("compiled {} fused kernels: {} built, {} from the cache ({})", plan.kernels.size(),
               plan.kernels_compiled, plan.kernels_from_cache, directory);
}

// Writes a pass's result under dump_dir (in the function's folder) when one is configured.
void dump(const CompilerOptions& options, const std::string& name, const std::string& text) {
  if (options.config.dump_dir.empty()) return;
  std::filesystem::path path = std::filesystem::path(options.config.dump_dir) / options.name / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

Device plan_device(const Graph& graph) {
  std::vector<int> placeholders = graph.placeholders();
  return placeholders.empty() ? kCPU : graph.value(placeholders[0]).meta.device;
}

}  // namespace

std::shared_ptr<CompiledPlan> compile_graph(const Graph& graph, const CompilerOptions& options) {
  using Clock = std::chrono::steady_clock;
  const CompilationConfig& config = options.config;
  auto plan = std::make_shared<CompiledPlan>();
  plan->graph = graph;
  auto timed = [&](const char* pass, auto&& body) {
    auto start = Clock::now();
    body();
    plan->timings.push_back(
        {pass, std::chrono::duration<double, std::milli>(Clock::now() - start).count()});
  };
  const Device device = plan_device(graph);
  plan->device = device;
  bool fusion = config.pass_config.enable_fusion;
  if (fusion && !has_codegen_target(device.type)) {
    spdlog::warn("no code generator for {}: compiling without fusion", device.str());
    fusion = false;
  }
  if (!config.dump_dir.empty() && !options.name.empty()) {
    // A fresh folder: what an earlier compile of this function wrote there would mislead.
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(config.dump_dir) / options.name, ignored);
  }
  dump(options, "00_traced.txt", graph.str());
  timed("cleanup", [&] { cleanup(plan->graph, config.pass_config); });
  dump(options, "01_cleanup.txt", plan->graph.str());
  timed("linear_prologue", [&] { fuse_linear_prologues(plan->graph, config.pass_config); });
  dump(options, "01b_linear_prologue.txt", plan->graph.str());
  timed("rotary_attention", [&] { fuse_rotary_attention(plan->graph, config.pass_config); });
  dump(options, "01c_rotary_attention.txt", plan->graph.str());
  timed("split", [&] {
    plan->steps = split_into_pieces(plan->graph, config.splitting_ops, &plan->num_pieces);
  });
  dump(options, "02_split.txt", steps_text(*plan));
  timed("fuse", [&] { fuse(*plan, fusion); });
  dump(options, "03_fuse.txt", steps_text(*plan));
  for (size_t id = 0; id < plan->graph.num_values(); ++id)
    for (const SymInt& size : plan->graph.value(static_cast<int>(id)).meta.shape)
      for (const std::string& name : size.symbols())
        plan->max_sizes[name] = options.max_dynamic_size;
  timed("materialize", [&] { materialize_views(*plan); });
  dump(options, "04_materialize.txt", steps_text(*plan));
  timed("follows_splitting", [&] { mark_steps_following_splitting_ops(*plan); });
  // Only CUDA kernels read the prefetch hint (kernels/cuda/gemm/l2_prefetch.cuh).
  if (device.type == DeviceType::cuda)
    timed("prefetch", [&] { plan_weight_prefetch(*plan, config.pass_config); });
  timed("memory_plan", [&] { plan_memory(*plan); });
  dump(options, "05_memory_plan.txt",
       fmt::format("arena {} bytes ({} without reuse), {} buffers\n", plan->memory.arena_bytes,
                   plan->memory.unplanned_bytes, plan->memory.slots.size()));
  const std::string cache_dir = resolve_cache_dir(config.cache_dir);
  // The kernels' measured choices (which GEMM path each shape takes) persist beside the kernels.
  use_measured_choice_files(cache_dir);
  timed("codegen", [&] {
    if (plan->kernels.empty()) return;
    std::unique_ptr<CodegenTarget> target = make_codegen_target(device, cache_dir);
    for (FusedKernel& kernel : plan->kernels) {
      RowKernelBody body = build_row_kernel_body(plan->graph, kernel);
      kernel.source = target->render(body, kernel.name);
      dump(options, "kernels/" + kernel.name + "." + target->source_extension(), kernel.source);
      kernel.compiled = target->load(kernel.source, kernel.name, body);
    }
    record_cache_stats(*plan, target->stats(), target->cache_directory());
  });
  dump(options, "explain.txt", plan->explain());
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
