// The sweep's outputs: a JSON document (schema "tessera-sweep/1", which bench/compare_torch.py
// writes too and bench/plot_sweep.py reads; bench/README.md describes every field), a CSV with one
// line per mode and batch size, and the table `tessera bench sweep` prints.
#pragma once

#include <string>

#include "engine/bench/sweep.h"

namespace tessera::bench {

std::string sweep_json(const SweepReport& report);
std::string sweep_csv(const SweepReport& report);
std::string sweep_table(const SweepReport& report);

}  // namespace tessera::bench
