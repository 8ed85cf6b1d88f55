// FP8 checkpoints written from seeded weights, and the logits comparisons the FP8 tests share
// (tests/models/test_fp8.cpp, test_fp8_kv_cache.cpp): an HF folder in either FP8 format, with the
// dense model of the numbers it holds; a runner's logits over a fixed token sequence; their
// largest difference; and a GPU run against the CPU's.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compile/compilation_config.h"
#include "models/model_weights.h"

namespace tessera::testing {

enum class Layout { block, channel, tensor_static };

// Quantizes the projections of `dense` (f32) in `layout` and writes an HF folder with the
// quantization_config `quantization` and the `extra` tensors; returns the dense model of the
// numbers written.
ModelWeights write_fp8_folder(const std::string& folder, const ModelWeights& dense, Layout layout,
                              const nlohmann::json& quantization, float input_scale = 0.05f,
                              const std::map<std::string, Tensor>& extra = {});

// quant_method fp8 with 128x128 blocks.
const nlohmann::json& fp8_block_config();
// compressed-tensors with `weights` strategy and these input activations.
nlohmann::json compressed_config(const std::string& weights, const nlohmann::json& activations);
const nlohmann::json& token_activations();   // dynamic per token
const nlohmann::json& static_activations();  // static per tensor

// The last-token logits of each step of a fixed token sequence: a prompt of `prompt` tokens,
// then 8 decode steps.
std::vector<std::vector<float>> logits_of(ModelWeights weights, int64_t prompt = 6,
                                          CompilationMode mode = CompilationMode::eager,
                                          const std::string& kv_cache_dtype = "auto");

// The largest |a - b| over all logits, of the largest |b|.
double relative_difference(const std::vector<std::vector<float>>& a,
                           const std::vector<std::vector<float>>& b);

// GPU logits against the CPU's: within `bound` of the largest, and the CPU's greedy pick wherever
// its lead over the runner-up is more than twice the measured difference (no perturbation that
// small can change it).
void expect_close_with_the_same_picks(const std::vector<std::vector<float>>& on_gpu,
                                      const std::vector<std::vector<float>>& cpu, double bound,
                                      const std::string& label);

}  // namespace tessera::testing
