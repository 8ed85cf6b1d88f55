// The flags of every subcommand that takes a model, declared once so that `generate`, `serve`,
// `explain` and `bench sweep` accept the same ones: --model/-m, --tokenizer, --device, --dtype,
// --max-model-len, --mode, --tensor-parallel-size/-tp (each a config key), -c/--config FILE and
// -O section.key=value. Config-key flags become overrides applied after the config file, in
// command-line order.
#pragma once

#include <string>
#include <vector>

#include "engine/cli/flag_parser.h"
#include "engine/config.h"

namespace tessera::cli {

struct ModelFlags {
  std::string config_path;
  std::vector<std::string> overrides;  // section.key=value

  // True when the model was chosen: --model, a config file, or an engine.model override.
  bool model_given() const;
  EngineConfig load() const;  // the config file, then the overrides
};

// Declares the model flags in their own --help section of `flag_set`, bound to `flags`.
void declare_model_flags(FlagSet& flag_set, ModelFlags& flags);

// When args[i] is a model flag, consumes it and its value (advancing i) into `flags` and returns
// true; false for any other argument. A flag without its value is a UsageError.
bool parse_model_flag(const std::vector<std::string>& args, size_t& i, ModelFlags& flags);

}  // namespace tessera::cli
