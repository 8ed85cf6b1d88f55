// The format-specific loaders behind load_model() (models/model_weights.h), which picks one by
// the path. Each returns weights under Hugging Face names in the run dtype and device.
#pragma once

#include <string>
#include <vector>

#include "models/model_config.h"
#include "models/model_weights.h"

namespace tessera::loaders {

// A folder with config.json and one or many *.safetensors (with model.safetensors.index.json).
ModelWeights load_hf_folder(const std::string& folder, const LoadOptions& options);
// The config.json (and generation_config.json) of such a folder, without reading weights.
ModelConfig read_hf_config(const std::string& folder);

// A llama2.c legacy checkpoint (.bin).
ModelWeights load_llama2c(const std::string& path, const LoadOptions& options);

// A GGUF file with F32/F16/BF16 tensors.
ModelWeights load_gguf_model(const std::string& path, const LoadOptions& options);

// "synthetic:NAME": deterministic random weights of a named shape.
ModelWeights load_synthetic(const std::string& name, const LoadOptions& options);

}  // namespace tessera::loaders
