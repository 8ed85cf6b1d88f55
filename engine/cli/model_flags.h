// The flags of every subcommand that takes a model, parsed in one place so that `generate`,
// `explain` and any later command accept the same ones: --model/-m, --tokenizer, --device,
// --dtype, --max-model-len, --mode (each a config key), -c/--config FILE and -O section.key=value.
// Config-key flags become overrides applied after the config file, in command-line order.
#pragma once

#include <string>
#include <vector>

#include "engine/config.h"

namespace tessera::cli {

struct ModelFlags {
  std::string config_path;
  std::vector<std::string> overrides;  // section.key=value

  // True when the model was chosen: --model, a config file, or an engine.model override.
  bool model_given() const;
  EngineConfig load() const;  // the config file, then the overrides
};

// When args[i] is a model flag, consumes it and its value (advancing i) into `flags` and returns
// true; false for any other argument. A flag without its value is a UsageError.
bool parse_model_flag(const std::vector<std::string>& args, size_t& i, ModelFlags& flags);

// The usage lines describing these flags, for each command's --help.
extern const char* const kModelFlagsUsage;

}  // namespace tessera::cli
