#include "engine/cli/model_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "engine/cli/command.h"

namespace tessera::cli {

namespace {

// Flags that set one config key each: {flag, short flag or "", key}.
constexpr std::array<std::array<const char*, 3>, 7> kKeyFlags{{
    {"--model", "-m", "engine.model"},
    {"--tokenizer", "", "engine.tokenizer"},
    {"--device", "", "engine.device"},
    {"--dtype", "", "engine.dtype"},
    {"--max-model-len", "", "engine.max_model_len"},
    {"--mode", "", "compilation.mode"},
    {"--tensor-parallel-size", "-tp", "engine.tensor_parallel_size"},
}};

}  // namespace

bool ModelFlags::model_given() const {
  return !config_path.empty() ||
         std::any_of(overrides.begin(), overrides.end(),
                     [](const std::string& o) { return o.starts_with("engine.model="); });
}

EngineConfig ModelFlags::load() const {
  return load_run_config(config_path, overrides);
}

bool parse_model_flag(const std::vector<std::string>& args, size_t& i, ModelFlags& flags) {
  const std::string& flag = args[i];
  auto value = [&]() -> const std::string& {
    if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", flag));
    return args[++i];
  };
  for (const auto& [name, short_name, key] : kKeyFlags) {
    if (flag == name || (*short_name != '\0' && flag == short_name)) {
      flags.overrides.push_back(fmt::format("{}={}", key, value()));
      return true;
    }
  }
  if (flag == "-c" || flag == "--config") {
    flags.config_path = value();
    return true;
  }
  if (flag == "-O") {
    flags.overrides.push_back(value());
    return true;
  }
  return false;
}

const char* const kModelFlagsUsage =
    "model options (every command that takes a model):\n"
    "  --model PATH, -m PATH  a Hugging Face folder, a llama2.c .bin (needs --tokenizer), a\n"
    "                         .gguf file or synthetic:NAME (default synthetic:tiny)  "
    "(engine.model)\n"
    "  --tokenizer PATH       the tokenizer, when the model has none inside      "
    "(engine.tokenizer)\n"
    "  --device D             cpu (default), cuda, cuda:N                           "
    "(engine.device)\n"
    "  --dtype T              auto, f32, bf16, f16                                   "
    "(engine.dtype)\n"
    "  --max-model-len N      cap on prompt + output tokens                  "
    "(engine.max_model_len)\n"
    "  --mode M               eager, traced or compiled                         "
    "(compilation.mode)\n"
    "  --tensor-parallel-size N, -tp N  shard the model over N devices (engine.device on)\n"
    "                         (engine.tensor_parallel_size)\n"
    "  -c, --config FILE      a YAML config (configs/*.yaml)\n"
    "  -O section.key=value   override any config key, e.g. -O compilation.custom_ops=[none]\n";

}  // namespace tessera::cli
