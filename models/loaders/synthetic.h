// Synthetic models: the configs of named shapes ("tiny", "small", "llama-1b", "llama-8b",
// "qwen3-tiny", "qwen3-0.6b", "qwen2-tiny", "qwen3-moe-tiny", "qwen3-30b-a3b") filled with
// deterministic random weights. They let tests, benchmarks and GPU comparisons run real model
// shapes without a checkpoint.
#pragma once

#include <string>
#include <vector>

#include "models/model_config.h"

namespace tessera::loaders {

// The names load_model() accepts after "synthetic:". A name may end in ":q8_0", ":q6_k" or
// ":q4_k_m": its linear and embedding weights are then quantized by Tessera (the formats placed as
// llama.cpp's file type of that name places them), for benchmarks of quantized weights without a
// file.
std::vector<std::string> synthetic_model_names();

// The config of a named synthetic model; throws listing the names for an unknown one.
ModelConfig synthetic_config(const std::string& name);

// Seed of the random weights; every tensor draws from its own stream keyed by its name, so a
// tensor's values do not depend on which other tensors exist.
inline constexpr uint64_t kSyntheticSeed = 0x7e55e7a2024ull;

}  // namespace tessera::loaders
