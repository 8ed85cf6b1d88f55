// `tessera explain`: compiles the model's forward and prints what the compiler made of it: the
// pieces and the splitting ops between them, ops and fused kernels per piece, unique compiled
// pieces, guards, launches and memory, and the time per pass; --dump-dir also writes each pass's
// graph and every generated kernel source.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <string>

#include "compile/passes/pass_manager.h"
#include "engine/cli/command.h"
#include "engine/cli/flag_parser.h"
#include "engine/cli/model_flags.h"
#include "engine/config.h"
#include "engine/kv_cache_manager.h"
#include "engine/runner/model_runner.h"
#include "engine/runner/run_setup.h"
#include "runtime/check.h"

namespace tessera::cli {
namespace {

// Where explain's flags set config keys: compiled mode first (what there is to explain; --mode
// may still say otherwise, and is refused), --dump-dir.
FlagSet explain_flags(ModelFlags& flags) {
  flags.overrides.push_back("compilation.mode=compiled");
  FlagSet flag_set("explain");
  flag_set.config_key(
      {"--dump-dir", "", "DIR", "write every pass's graph and every generated kernel source there"},
      "compilation.dump_dir", &flags.overrides);
  declare_model_flags(flag_set, flags);
  return flag_set;
}

int run_explain(const std::vector<std::string>& args) {
  ModelFlags flags;
  explain_flags(flags).parse(args);
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  EngineConfig config = flags.load();
  TESSERA_REQUIRE(config.compilation.mode == CompilationMode::compiled,
                  "tessera explain shows the compiled plan; compilation.mode must be compiled "
                  "(the default here), got {}",
                  enum_name(config.compilation.mode));
  // Under tensor parallelism, rank 0's graph and plan (every rank's are alike).
  auto models = load_run_models(config);
  const std::shared_ptr<const CausalLM> model = models.front();
  double load_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  RunnerConfig options = make_runner_config(config, *model);
  std::unique_ptr<ModelExecutor> executor = make_model_executor(models, options);
  ModelExecutor& runner = *executor;
  // One step of a few tokens traces and compiles the forward.
  std::vector<int32_t> ids{1, 2, 3, 4};
  KVCacheManager blocks(runner.num_kv_blocks(), options.cache.block_size);
  blocks.allocate(0, static_cast<int64_t>(ids.size()));
  SequenceInput input{ids, 0, blocks.block_table(0)};
  auto compile_start = Clock::now();
  runner.execute(std::span(&input, 1));
  double compile_seconds = std::chrono::duration<double>(Clock::now() - compile_start).count();
  auto plan = runner.latest_plan();
  TESSERA_CHECK(plan != nullptr, "compiled mode produced no plan");
  const auto& trace = runner.compiled()->entries().at(0).trace;
  fmt::print("model {}: {}\n", config.model.model, model->config().str());
  fmt::print("weights: {:.1f} MiB ({})\n", model->weight_bytes() / 1048576.0,
             model->weight_formats_str());
  fmt::print("KV cache: {} blocks of {} tokens of {}, {:.2f} MiB\n", runner.num_kv_blocks(),
             options.cache.block_size, dtype_name(options.cache.dtype(model->dtype())),
             runner.kv_cache_bytes() / 1048576.0);
  // As traced: the passes' custom ops enabled (rotary_embedding for the rotary-attention pass).
  fmt::print(
      "custom ops: {}; splitting ops: {}\n",
      custom_ops_for_passes(config.compilation.custom_op_config(), config.compilation.pass_config)
          .str(),
      fmt::join(config.compilation.splitting_ops, ", "));
  fmt::print("traced graph: {} nodes ({} ops); guards: {}\n", trace.graph.nodes().size(),
             trace.graph.num_calls(), trace.guards.empty() ? "none" : "");
  for (const Guard& guard : trace.guards) fmt::print("  {}\n", guard.str());
  fmt::print("{}", plan->explain());
  fmt::print("load {:.2f} s; trace + compile + first step {:.2f} s\n", load_seconds,
             compile_seconds);
  if (!config.compilation.dump_dir.empty())
    fmt::print("pass graphs and kernel sources written to {0}/forward and {0}/logits_head\n",
               config.compilation.dump_dir);
  return 0;
}

std::string usage() {
  ModelFlags defaults;
  return "usage: tessera explain [--model PATH] [--dump-dir DIR] [model options]\n"
         "\n"
         "Traces and compiles the model's forward (compilation.mode=compiled) and prints the "
         "pieces,\n"
         "the splitting ops between them, ops and fused kernels per piece, unique compiled "
         "pieces,\n"
         "guards, launches per forward, the arena, and time per pass. --dump-dir writes the "
         "traced\n"
         "graph (00-traced.txt), each pass's result in order (01-cleanup.txt, ...) and every\n"
         "generated kernel source there, a folder per compiled function: forward, logits_head\n"
         "(emptied first).\n"
         "\n" +
         explain_flags(defaults).help();
}

TESSERA_REGISTER_COMMAND((Command{"explain", "show how the compiler splits and fuses a model",
                                  usage, run_explain}));

}  // namespace
}  // namespace tessera::cli
