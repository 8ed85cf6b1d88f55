// `tessera bench serve`'s outputs: JSON (schema "tessera-serve/1", described in bench/README.md)
// and a table with one column per concurrency level.
#pragma once

#include <string>

#include "engine/bench/serve_load.h"

namespace tessera::bench {

std::string serve_json(const ServeReport& report);
std::string serve_table(const ServeReport& report);

}  // namespace tessera::bench
