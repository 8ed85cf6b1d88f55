#include "compile/compiler.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "compile/codegen/cpp_codegen.h"
#include "compile/codegen/cuda_codegen.h"
#include "compile/codegen/nvrtc_cache.h"
#include "compile/passes/passes.h"
#include "compile/piecewise_runner.h"
#include "kernels/check.h"

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
    const char* kind = step.kind == StepKind::view      ? "view"
                       : step.kind == StepKind::library ? "library"
                                                        : "SPLIT";
    out += fmt::format("piece {}: {} {} -> {}\n", step.piece, kind, node.op->name,
                       plan.graph.value(node.outputs[0]).meta.str());
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

// Writes a pass's result under dump_dir when one is configured.
void dump(const CompilationConfig& config, const std::string& name, const std::string& text) {
  if (config.dump_dir.empty()) return;
  std::filesystem::path path = std::filesystem::path(config.dump_dir) / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
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
  dump(config, "00_traced.txt", graph.str());
  timed("cleanup", [&] { cleanup(plan->graph, config.pass_config); });
  dump(config, "01_cleanup.txt", plan->graph.str());
  timed("split", [&] {
    plan->steps = split_into_pieces(plan->graph, config.splitting_ops, &plan->num_pieces);
  });
  dump(config, "02_split.txt", steps_text(*plan));
  timed("fuse", [&] { fuse(*plan, config.pass_config.enable_fusion); });
  dump(config, "03_fuse.txt", steps_text(*plan));
  for (const std::string& symbol : [&] {
         std::vector<std::string> names;
         for (size_t id = 0; id < plan->graph.num_values(); ++id)
           for (const SymInt& size : plan->graph.value(static_cast<int>(id)).meta.shape)
             for (const std::string& name : size.symbols()) names.push_back(name);
         return names;
       }())
    plan->max_sizes[symbol] = options.max_dynamic_size;
  timed("memory_plan", [&] { plan_memory(*plan); });
  dump(config, "04_memory_plan.txt",
       fmt::format("arena {} bytes ({} without reuse), {} buffers\n", plan->memory.arena_bytes,
                   plan->memory.unplanned_bytes, plan->memory.slots.size()));
  timed("codegen", [&] {
    std::vector<Device> devices;
    for (int id : plan->graph.placeholders()) devices.push_back(plan->graph.value(id).meta.device);
    Device device = devices.empty() ? kCPU : devices[0];
    if (device.is_cpu()) {
      CpuKernelCache cache(resolve_cache_dir(config.cache_dir));
      for (FusedKernel& kernel : plan->kernels) {
        RowKernelBody body = build_row_kernel_body(plan->graph, kernel);
        kernel.source = generate_cpp_kernel(body, kernel.name);
        dump(config, "kernels/" + kernel.name + ".cpp", kernel.source);
        void* function = cache.load(kernel.source, kernel.name);
        kernel.compiled = std::shared_ptr<void>(function, [](void*) {});
      }
      record_cache_stats(*plan, cache.stats(), cache.directory());
    }
#ifdef TESSERA_CUDA
    if (device.type == DeviceType::cuda && !plan->kernels.empty()) {
      NvrtcKernelCache cache =
          NvrtcKernelCache::for_device(resolve_cache_dir(config.cache_dir), device.index);
      for (FusedKernel& kernel : plan->kernels) {
        RowKernelBody body = build_row_kernel_body(plan->graph, kernel);
        kernel.source = generate_cuda_kernel(body);
        dump(config, "kernels/" + kernel.name + ".cu", kernel.source);
        auto loaded = std::make_shared<CudaRowKernel>();
        loaded->function = cache.load(kernel.source, kernel.name);
        loaded->block_size = cuda_block_size(body);
        loaded->num_buffers = kernel.inputs.size() + kernel.outputs.size();
        kernel.compiled = loaded;
      }
      record_cache_stats(*plan, cache.stats(), cache.directory());
    }
#endif
  });
  dump(config, "explain.txt", plan->explain());
  return plan;
}

CompileBackend make_compiled_backend(
    CompilerOptions options, std::function<void(std::shared_ptr<const CompiledPlan>)> on_plan) {
  return [options, on_plan](const Graph& graph, std::span<const Tensor>) -> CompiledCallable {
    std::shared_ptr<const CompiledPlan> plan = compile_graph(graph, options);
    if (on_plan) on_plan(plan);
    auto runner = std::make_shared<PiecewiseRunner>(plan);
    return [runner](std::span<const Tensor> inputs) { return runner->run(inputs); };
  };
}

}  // namespace tessera
