// `tessera generate`: loads a model and its tokenizer, completes one prompt, streaming the text,
// and reports speed. With no --model it runs the embedded default, synthetic:tiny.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "engine/cli/command.h"
#include "engine/cli/model_flags.h"
#include "engine/config.h"
#include "engine/generator.h"
#include "engine/run_setup.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"

namespace tessera::cli {
namespace {

struct GenerateOptions {
  ModelFlags model;
  std::string prompt;
  SamplingParams sampling;
  bool quiet = false;
};

GenerateOptions parse(const std::vector<std::string>& args) {
  GenerateOptions options;
  options.sampling.temperature = 0.0;
  options.sampling.max_tokens = 256;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", flag));
      return args[++i];
    };
    if (parse_model_flag(args, i, options.model)) continue;
    if (flag == "--prompt" || flag == "-p")
      options.prompt = value();
    else if (flag == "--max-tokens" || flag == "-n")
      options.sampling.max_tokens = parse_number<int64_t>(flag, value());
    else if (flag == "--temperature")
      options.sampling.temperature = parse_number<double>(flag, value());
    else if (flag == "--top-k")
      options.sampling.top_k = parse_number<int64_t>(flag, value());
    else if (flag == "--top-p")
      options.sampling.top_p = parse_number<double>(flag, value());
    else if (flag == "--min-p")
      options.sampling.min_p = parse_number<double>(flag, value());
    else if (flag == "--seed")
      options.sampling.seed = parse_number<uint64_t>(flag, value());
    else if (flag == "--quiet" || flag == "-q")
      options.quiet = true;
    else
      throw UsageError(fmt::format("generate: unknown option '{}'", flag));
  }
  options.sampling.validate();
  return options;
}

int run_generate(const std::vector<std::string>& args) {
  GenerateOptions options = parse(args);
  RunConfig config = options.model.load();
  const EngineConfig& engine = config.engine;
  if (!options.model.model_given())
    fmt::print(stderr,
               "no --model given: running the embedded default {} (random weights, byte "
               "tokenizer; its text is noise)\n",
               engine.model);
  auto tokenizer = load_run_tokenizer(engine);
  auto models = load_run_models(engine);
  const std::shared_ptr<const CausalLM> model = models.front();
  RunnerOptions runner_options = make_runner_options(config, *model);
  std::unique_ptr<ModelExecutor> executor = make_model_executor(models, runner_options);
  ModelExecutor& runner = *executor;
  spdlog::info("model {} ({}), {} on {}, weights {:.1f} MiB, KV cache {:.1f} MiB, mode {}",
               engine.model, model->config().architecture, dtype_name(model->dtype()),
               model->device().str(), model->weight_bytes() / 1048576.0,
               runner.kv_cache_bytes() / 1048576.0, runner_options.mode);
  GenerateRequest request{options.prompt, options.sampling, {}, engine.async_scheduling};
  if (!options.quiet) fmt::print("{}", options.prompt);
  std::fflush(stdout);
  GenerationResult result = generate(runner, *tokenizer, request, [&](const std::string& piece) {
    if (!options.quiet) {
      fmt::print("{}", piece);
      std::fflush(stdout);
    }
  });
  if (options.quiet) fmt::print("{}", result.text);
  fmt::print("\n");
  std::fflush(stdout);
  fmt::print(stderr,
             "prompt {} tokens in {:.3f} s; generated {} tokens ({}), decode {:.1f} tokens/s\n",
             result.prompt_ids.size(), result.prefill_seconds, result.output_ids.size(),
             result.finish_reason, result.decode_tokens_per_second());
  spdlog::info("{}", runner.memory_report());
  return 0;
}

const std::string kUsage =
    std::string(
        "usage: tessera generate [--model PATH] [--tokenizer PATH] [--prompt TEXT] [options]\n"
        "\n"
        "Completes one prompt and streams the text to stdout (logs and the speed report go to\n"
        "stderr). Without --model it runs synthetic:tiny.\n"
        "\n"
        "options:\n"
        "  --prompt TEXT, -p TEXT the prompt (default empty: the model starts from BOS)\n"
        "  --max-tokens N, -n N   tokens to generate at most (256)\n"
        "  --temperature T        0 is greedy (default 0)\n"
        "  --top-k K, --top-p P, --min-p P, --seed S   sampling controls\n"
        "  --quiet, -q            print the completion only at the end\n"
        "\n") +
    kModelFlagsUsage;

TESSERA_REGISTER_COMMAND((Command{"generate", "complete a prompt with a model", kUsage,
                                  run_generate}));

}  // namespace
}  // namespace tessera::cli
