// load_model(): picks the loader by the path's form.
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>

#include "models/embedded_model.h"
#include "models/loaders/fp8_weights.h"
#include "models/loaders/loaders.h"
#include "models/mixture_of_experts.h"
#include "models/model_weights.h"
#include "runtime/check.h"

namespace tessera {

namespace {

ModelWeights load_checkpoint(const std::string& model, const LoadOptions& options) {
  namespace fs = std::filesystem;
  const std::string path = resolve_model_path(model);
  constexpr std::string_view kSyntheticPrefix = "synthetic:";
  ModelWeights weights;
  if (path.starts_with(kSyntheticPrefix)) {
    weights = loaders::load_synthetic(path.substr(kSyntheticPrefix.size()), options);
  } else {
    TESSERA_REQUIRE(fs::exists(path),
                    "{}: no such file or directory; give a Hugging Face model folder, a llama2.c "
                    ".bin, a .gguf file, embedded:NAME or synthetic:NAME",
                    path);
    const std::string extension = fs::path(path).extension().string();
    if (fs::is_directory(path)) {
      weights = loaders::load_hf_folder(path, options);
    } else if (extension == ".bin") {
      weights = loaders::load_llama2c(path, options);
    } else if (extension == ".gguf") {
      weights = loaders::load_gguf_model(path, options);
    } else if (extension == ".safetensors") {
      throw Error(
          fmt::format("{}: give the folder holding it and its config.json, not the "
                      ".safetensors file",
                      path));
    } else {
      throw Error(
          fmt::format("{}: unknown model format; give a Hugging Face model folder, a "
                      "llama2.c .bin, a .gguf file, embedded:NAME or synthetic:NAME",
                      path));
    }
  }
  return weights;
}

}  // namespace

ModelWeights load_model(const std::string& model, const LoadOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  ModelWeights weights;
  if (options.quantization.empty()) {
    weights = load_checkpoint(model, options);
  } else {
    TESSERA_REQUIRE(options.quantization == "fp8",
                    "quantization '{}' is not known; valid choices: {} (or leave it unset)",
                    options.quantization, loaders::kQuantizationChoices);
    // Quantized on the host, one projection at a time, then moved: the float copy never
    // reaches the device.
    LoadOptions on_host = options;
    on_host.device = kCPU;
    weights = load_checkpoint(model, on_host);
    loaders::quantize_fp8_online(weights);
    for (auto& [name, tensor] : weights.tensors) tensor = tensor.to(options.device);
  }
  spdlog::info("loaded {} in {:.2f} s: {}, {:.1f} MiB as {} on {}", weights.source,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
               weights.config.str(), static_cast<double>(weights.total_bytes()) / (1 << 20),
               dtype_name(options.dtype), options.device.str());
  if (weights.config.num_experts > 0)
    spdlog::info("mixture of experts: {}", expert_parameters_str(weights));
  return weights;
}

}  // namespace tessera
