// Synthetic models: the configs of named shapes ("tiny", "llama-1b", "llama-8b", "qwen3-tiny",
// "qwen3-0.6b", "qwen2-tiny") filled with deterministic random weights. They let tests, benchmarks
// and GPU comparisons run real model shapes without a checkpoint.
#pragma once

#include <string>
#include <vector>

#include "models/model_config.h"

namespace tessera::loaders {

// The names load_model() accepts after "synthetic:".
std::vector<std::string> synthetic_model_names();

// The config of a named synthetic model; throws listing the names for an unknown one.
ModelConfig synthetic_config(const std::string& name);

// Seed of the random weights; every tensor draws from its own stream keyed by its name, so a
// tensor's values do not depend on which other tensors exist.
inline constexpr uint64_t kSyntheticSeed = 0x7e55e7a2024ull;

}  // namespace tessera::loaders
