// Loaded weights by their Hugging Face names ("model.layers.0.self_attn.q_proj.weight"), already
// in the run dtype and on the run device. Loaders convert other layouts to these names and to
// HF's conventions (rotate_half RoPE row order for q/k).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "models/model_config.h"
#include "models/tensor_parallel.h"
#include "runtime/tensor.h"

namespace tessera {

struct ModelWeights {
  ModelConfig config;
  std::map<std::string, Tensor> tensors;
  std::string source;  // the path or synthetic:NAME it came from, for messages
  // A tensor-parallel rank's shard (models/tensor_parallel.h): config is then the rank's, and
  // the embedding and LM head hold vocab_shard_rows rows.
  TensorParallel parallel;

  // Throws naming the missing tensor and the source when absent.
  const Tensor& get(const std::string& name) const;
  bool has(const std::string& name) const { return tensors.count(name) != 0; }
  // Throws naming the tensor, the source, and both shapes when the shape differs.
  const Tensor& get(const std::string& name, const Shape& expected_shape) const;
  size_t total_bytes() const;
};

struct LoadOptions {
  LoadOptions() = default;
  LoadOptions(DType run_dtype, Device run_device, std::string quantize_to = "")
      : dtype(run_dtype), device(run_device), quantization(std::move(quantize_to)) {}

  DType dtype = DType::f32;  // run dtype; weights are cast to it
  Device device = kCPU;
  // "" or "fp8": quantize a float checkpoint's projections to FP8 at load time
  // (models/loaders/fp8_weights.h).
  std::string quantization;
};

// Loads a model from: a Hugging Face folder (config.json + *.safetensors [+ index]), a llama2.c
// checkpoint (.bin), a GGUF file (.gguf), "embedded:NAME" (a model shipped with Tessera:
// embedded_model.h), or "synthetic:NAME" (deterministic random weights of a named shape:
// synthetic:tiny, synthetic:llama-1b). Errors name the file and the tensor.
ModelWeights load_model(const std::string& model, const LoadOptions& options);

}  // namespace tessera
