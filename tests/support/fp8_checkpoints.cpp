#include "support/fp8_checkpoints.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "engine/runner/model_runner.h"
#include "engine/runner/run_setup.h"
#include "kernels/quant/fp8_scaling.h"
#include "models/architecture_registry.h"
#include "runtime/float8.h"
#include "support/loader_files.h"
#include "support/runner_steps.h"

namespace tessera::testing {

namespace {

// Rows [row0, row0 + rows) x columns [col0, col0 + cols) of a row-major [n, k] tensor.
float block_amax(const std::vector<float>& values, int64_t k, int64_t row0, int64_t rows,
                 int64_t col0, int64_t cols) {
  float amax = 0;
  for (int64_t r = row0; r < row0 + rows; ++r)
    for (int64_t c = col0; c < col0 + cols; ++c)
      amax = std::max(amax, std::fabs(values[r * k + c]));
  return amax;
}

}  // namespace

ModelWeights write_fp8_folder(const std::string& folder, const ModelWeights& dense, Layout layout,
                              const nlohmann::json& quantization, float input_scale,
                              const std::map<std::string, Tensor>& extra) {
  ModelWeights file, dequantized = dense;
  file.config = dense.config;
  file.tensors = extra;
  for (const auto& [name, tensor] : dense.tensors) {
    if (!name.ends_with("_proj.weight")) {
      file.tensors.emplace(name, tensor);
      continue;
    }
    const std::string module = name.substr(0, name.size() - 7);
    const int64_t n = tensor.size(0), k = tensor.size(1);
    const std::vector<float> values = tensor.to_floats();
    Tensor codes = Tensor::empty({n, k}, DType::f8_e4m3);
    std::vector<float> back(values.size());
    auto* code = codes.data<uint8_t>();
    // The scale of element (r, c), by the layout.
    const int64_t row_blocks = (n + 127) / 128, column_blocks = (k + 127) / 128;
    std::vector<float> scales;
    if (layout == Layout::block) {
      for (int64_t rb = 0; rb < row_blocks; ++rb)
        for (int64_t cb = 0; cb < column_blocks; ++cb)
          scales.push_back(fp8_dynamic_scale(
              block_amax(values, k, rb * 128, std::min<int64_t>(128, n - rb * 128), cb * 128,
                         std::min<int64_t>(128, k - cb * 128))));
    } else if (layout == Layout::channel) {
      for (int64_t r = 0; r < n; ++r)
        scales.push_back(fp8_dynamic_scale(block_amax(values, k, r, 1, 0, k)));
    } else {
      scales.push_back(fp8_dynamic_scale(block_amax(values, k, 0, n, 0, k)));
    }
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const float scale = layout == Layout::block ? scales[(r / 128) * column_blocks + c / 128]
                            : layout == Layout::channel ? scales[r]
                                                        : scales[0];
        code[r * k + c] = Float8E4M3::from_float(values[r * k + c] / scale);
        back[r * k + c] = Float8E4M3::to_float(code[r * k + c]) * scale;
      }
    file.tensors.emplace(name, codes);
    if (layout == Layout::block) {
      file.tensors.emplace(module + ".weight_scale_inv",
                           Tensor::from_floats(scales, {row_blocks, column_blocks}));
    } else if (layout == Layout::channel) {
      file.tensors.emplace(module + ".weight_scale", Tensor::from_floats(scales, {n, 1}));
    } else {
      file.tensors.emplace(module + ".weight_scale", Tensor::from_floats(scales, {}));
      file.tensors.emplace(module + ".input_scale",
                           Tensor::from_floats(std::vector<float>{input_scale}, {}));
    }
    dequantized.tensors[name] = Tensor::from_floats(back, {n, k});
  }
  nlohmann::json config = hf_config_json(dense.config);
  config["quantization_config"] = quantization;
  write_hf_folder(folder, file, config);
  return dequantized;
}

const nlohmann::json& fp8_block_config() {
  static const nlohmann::json config = {{"quant_method", "fp8"},
                                        {"fmt", "e4m3"},
                                        {"activation_scheme", "dynamic"},
                                        {"weight_block_size", {128, 128}}};
  return config;
}

nlohmann::json compressed_config(const std::string& weights, const nlohmann::json& activations) {
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"quantization_status", "compressed"},
          {"ignore", {"lm_head"}},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights",
               {{"num_bits", 8},
                {"type", "float"},
                {"strategy", weights},
                {"symmetric", true},
                {"dynamic", false},
                {"observer", "minmax"}}},
              {"input_activations", activations}}}}}};
}

const nlohmann::json& token_activations() {
  static const nlohmann::json activations = {
      {"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}};
  return activations;
}

const nlohmann::json& static_activations() {
  static const nlohmann::json activations = {
      {"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}};
  return activations;
}

std::vector<std::vector<float>> logits_of(ModelWeights weights, int64_t prompt,
                                          CompilationMode mode, const std::string& kv_cache_dtype) {
  std::shared_ptr<const CausalLM> model = create_model(std::move(weights), 64);
  RunnerConfig config = runner_config(mode);
  config.cache.kv_cache_dtype = kv_cache_dtype;
  ModelRunner runner(model, with_kv_blocks_for(config, model->max_positions()));
  std::vector<int32_t> ids;
  for (int i = 0; i < prompt + 8; ++i) ids.push_back((i * 37 + 5) % 512);
  std::vector<int64_t> chunks{prompt};
  chunks.resize(9, 1);
  return logits_by_chunks(runner, ids, chunks);
}

double relative_difference(const std::vector<std::vector<float>>& a,
                           const std::vector<std::vector<float>>& b) {
  double difference = 0, largest = 0;
  for (size_t step = 0; step < b.size(); ++step)
    for (size_t v = 0; v < b[step].size(); ++v) {
      difference = std::max<double>(difference, std::fabs(a[step][v] - b[step][v]));
      largest = std::max<double>(largest, std::fabs(b[step][v]));
    }
  return difference / largest;
}

void expect_close_with_the_same_picks(const std::vector<std::vector<float>>& on_gpu,
                                      const std::vector<std::vector<float>>& cpu, double bound,
                                      const std::string& label) {
  const double difference = relative_difference(on_gpu, cpu);
  std::printf("%s: GPU against CPU, max logit difference %.3e of the largest\n", label.c_str(),
              difference);
  EXPECT_LT(difference, bound) << label;
  double largest = 0;
  for (const std::vector<float>& row : cpu)
    for (float value : row) largest = std::max<double>(largest, std::fabs(value));
  const auto pick = [](const std::vector<float>& row) {
    return std::max_element(row.begin(), row.end()) - row.begin();
  };
  for (size_t step = 0; step < cpu.size(); ++step) {
    std::vector<float> sorted = cpu[step];
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] > 2 * difference * largest) {
      EXPECT_EQ(pick(on_gpu[step]), pick(cpu[step])) << label << ", step " << step;
    }
  }
}

}  // namespace tessera::testing
