// `tessera generate`: loads a model and its tokenizer, completes one prompt, streaming the text,
// and reports speed. With no --model it runs the embedded default, stories260K.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "engine/cli/command.h"
#include "engine/cli/flag_parser.h"
#include "engine/cli/model_flags.h"
#include "engine/config.h"
#include "engine/generator.h"
#include "engine/runner/run_setup.h"
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

FlagSet generate_flags(GenerateOptions& options) {
  FlagSet flags("generate");
  SamplingParams& sampling = options.sampling;
  flags
      .text({"--prompt", "-p", "TEXT", "the prompt (default empty: the model starts from BOS)"},
            &options.prompt)
      .integer({"--max-tokens", "-n", "N", "tokens to generate at most"}, &sampling.max_tokens, 1,
               std::numeric_limits<int32_t>::max())
      .number({"--temperature", "", "T", "0 is greedy"}, &sampling.temperature, 0, 100)
      .integer({"--top-k", "", "K", "sample among the K likeliest tokens (-1 or 0: all)"},
               &sampling.top_k, -1, std::numeric_limits<int64_t>::max())
      .number({"--top-p", "", "P", "sample within the top P of the probability mass"},
              &sampling.top_p, 0, 1)
      .number({"--min-p", "", "P", "drop tokens below P times the likeliest one's probability"},
              &sampling.min_p, 0, 1)
      .integer({"--seed", "", "S", "the sampling seed (default: random)"}, &sampling.seed,
               uint64_t{0}, std::numeric_limits<uint64_t>::max())
      .flag({"--quiet", "-q", "", "print the completion only at the end"}, &options.quiet);
  declare_model_flags(flags, options.model);
  return flags;
}

GenerateOptions default_options() {
  GenerateOptions options;
  options.sampling.temperature = 0.0;
  options.sampling.max_tokens = 256;
  return options;
}

GenerateOptions parse(const std::vector<std::string>& args) {
  GenerateOptions options = default_options();
  generate_flags(options).parse(args);
  options.sampling.validate();
  return options;
}

int run_generate(const std::vector<std::string>& args) {
  GenerateOptions options = parse(args);
  EngineConfig config = options.model.load();
  const ModelLoadConfig& engine = config.model;
  if (!options.model.model_given())
    fmt::print(stderr,
               "no --model given: running the embedded default {} (llama2.c's 260K-parameter "
               "model of TinyStories); give --model for another\n",
               engine.model);
  auto tokenizer = load_run_tokenizer(engine);
  auto models = load_run_models(config);
  const std::shared_ptr<const CausalLM> model = models.front();
  std::unique_ptr<ModelExecutor> executor =
      make_model_executor(models, make_runner_config(config, *model));
  ModelExecutor& runner = *executor;
  spdlog::info("model {} ({}), {} on {}, weights {:.1f} MiB, KV cache {:.1f} MiB, mode {}",
               engine.model, model->config().architecture, dtype_name(model->dtype()),
               model->device().str(), model->weight_bytes() / 1048576.0,
               runner.kv_cache_bytes() / 1048576.0, enum_name(config.compilation.mode));
  GenerateRequest request{options.prompt, options.sampling, {}, {}, config.speculative};
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
  if (config.speculative.enabled())
    fmt::print(stderr,
               "speculative decoding: {} proposals verified, {} of {} proposed tokens accepted "
               "({:.1f}%, {:.2f} tokens per verifying step)\n",
               result.drafts, result.accepted_tokens, result.draft_tokens,
               100.0 * static_cast<double>(result.accepted_tokens) /
                   static_cast<double>(std::max<int64_t>(result.draft_tokens, 1)),
               1.0 + static_cast<double>(result.accepted_tokens) /
                         static_cast<double>(std::max<int64_t>(result.drafts, 1)));
  spdlog::info("{}", runner.memory_report());
  return 0;
}

std::string usage() {
  GenerateOptions defaults = default_options();
  return "usage: tessera generate [--model PATH] [--prompt TEXT] [options]\n"
         "\n"
         "Completes one prompt and streams the text to stdout (logs and the speed report go to\n"
         "stderr). Without --model it runs the embedded stories260K (models/embedded/).\n"
         "\n" +
         generate_flags(defaults).help();
}

TESSERA_REGISTER_COMMAND((Command{"generate", "complete a prompt with a model", usage,
                                  run_generate}));

}  // namespace
}  // namespace tessera::cli
