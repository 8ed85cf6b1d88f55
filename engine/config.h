// A run's configuration from one YAML file with `engine:` and `compilation:` sections, any key of
// which can be overridden on the command line (-O compilation.mode=eager), into the typed tree of
// engine/engine_config.h. Unknown keys and bad values are errors naming the key and listing what
// is valid; every check of the settings is made here, once, as the tree is built.
#pragma once

#include <string>
#include <vector>

#include "engine/engine_config.h"

namespace tessera {

// Reads `path` (empty: defaults only), then applies each "section.key=value" override; the value
// is YAML (a scalar or a flow list like [1, 2, 4]). Throws tessera::Error naming the file, the key
// and the valid choices.
EngineConfig load_run_config(const std::string& path,
                             const std::vector<std::string>& overrides = {});
// Every key with its type and default, for `--help` and the README.
std::string describe_config_keys();

}  // namespace tessera
