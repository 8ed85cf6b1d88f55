#include "models/loaders/fp8_weights.h"

#include <cmath>

#include "kernels/quant/fp8_scaling.h"
#include "models/fp8_format.h"
#include "models/linear_weight.h"
#include "runtime/check.h"
#include "runtime/cpu/parallel.h"
#include "runtime/float8.h"

namespace tessera::loaders {
namespace {

int64_t ceil_blocks(int64_t size) {
  return (size + kFp8Block - 1) / kFp8Block;
}

// A stored scale tensor as f32 on the host: F32, F16 or BF16, of the given element count.
Tensor host_scales(const FoundTensor& found, const std::string& name, int64_t count,
                   const std::string& expected_shape) {
  TESSERA_REQUIRE(
      found.stored_dtype_name.empty() && is_floating(found.stored.dtype),
      "{}: FP8 scale '{}' is stored as {}; scales must be F32, BF16 or F16", found.file, name,
      found.stored_dtype_name.empty() ? dtype_name(found.stored.dtype) : found.stored_dtype_name);
  TESSERA_REQUIRE(shape_numel(found.stored.shape) == count,
                  "{}: FP8 scale '{}' has shape {} but must have {}", found.file, name,
                  shape_str(found.stored.shape), expected_shape);
  StoredTensor flat = found.stored;
  flat.shape = {count};
  LoadOptions as_f32;
  as_f32.dtype = DType::f32;
  return materialize(flat, as_f32);
}

// Scales must be finite and positive (an all-zero block may have scale 0: its codes are zero).
void check_scale_values(const Tensor& scales, const std::string& file, const std::string& name,
                        bool zero_allowed) {
  const float* values = scales.data<float>();
  for (int64_t i = 0; i < scales.numel(); ++i) {
    TESSERA_REQUIRE(std::isfinite(values[i]) && (values[i] > 0 || (zero_allowed && values[i] == 0)),
                    "{}: FP8 scale '{}' holds {} at index {}; scales must be finite and {}", file,
                    name, values[i], i, zero_allowed ? ">= 0" : "> 0");
  }
}

// A fixed scale (an input_scale, a KV cache's k_scale / v_scale): one value, at least
// kFp8MinScale, so that its inverse is finite.
Tensor fixed_scale(const FoundTensor& found, const std::string& name) {
  Tensor scale = host_scales(found, name, 1, "[] or [1]");
  check_scale_values(scale, found.file, name, /*zero_allowed=*/false);
  TESSERA_REQUIRE(scale.data<float>()[0] >= kFp8MinScale,
                  "{}: FP8 scale '{}' is {}, below the smallest scale {} (its inverse would "
                  "overflow)",
                  found.file, name, scale.data<float>()[0], kFp8MinScale);
  return scale;
}

}  // namespace

bool is_projection_weight(const std::string& name) {
  return name.ends_with("_proj.weight");
}

void load_fp8_scales(const ModelConfig& config,
                     const std::function<std::optional<FoundTensor>(const std::string&)>& find,
                     const std::string& where, Device device,
                     std::map<std::string, Tensor>& tensors) {
  const Fp8Format& format = config.fp8;
  std::map<std::string, Tensor> scales;
  for (const auto& [name, weight] : tensors) {
    if (weight.dtype() != DType::f8_e4m3) continue;
    TESSERA_REQUIRE(is_projection_weight(name),
                    "{}: tensor '{}' is FP8; only the projections (q/k/v/o, gate/up/down) may be",
                    where, name);
    TESSERA_REQUIRE(format.enabled(),
                    "{}: tensor '{}' is FP8 but config.json has no quantization_config saying how "
                    "it is scaled",
                    where, name);
    const std::string module = projection_module(name);
    TESSERA_REQUIRE(!fp8_ignores(format, module),
                    "{}: tensor '{}' is FP8 but quantization_config lists '{}' as not quantized",
                    where, name, module);
    const int64_t n = weight.size(0), k = weight.size(1);
    const bool block = format.weight_scale == Fp8Format::WeightScale::block;
    const std::string scale_name =
        module + (block && format.method == "fp8" ? ".weight_scale_inv" : ".weight_scale");
    std::optional<FoundTensor> found = find(scale_name);
    TESSERA_REQUIRE(found.has_value(), "{}: FP8 tensor '{}' has no scale '{}' ({})", where, name,
                    scale_name, format.str());
    Tensor scale;
    if (block) {
      const Shape expected{ceil_blocks(n), ceil_blocks(k)};
      TESSERA_REQUIRE(found->stored.shape == expected,
                      "{}: FP8 scale '{}' has shape {} but weight {} in 128x128 blocks needs {}",
                      found->file, scale_name, shape_str(found->stored.shape),
                      shape_str(weight.sizes()), shape_str(expected));
      scale = host_scales(*found, scale_name, expected[0] * expected[1], shape_str(expected))
                  .view(expected);
    } else if (format.weight_scale == Fp8Format::WeightScale::channel) {
      const bool shaped = found->stored.shape == Shape{n} || found->stored.shape == Shape{n, 1};
      TESSERA_REQUIRE(shaped, "{}: FP8 scale '{}' has shape {} but a scale per channel needs [{}]",
                      found->file, scale_name, shape_str(found->stored.shape), n);
      scale = host_scales(*found, scale_name, n, fmt::format("[{}]", n));
    } else {  // one scale for the tensor, repeated per channel
      const float value = host_scales(*found, scale_name, 1, "[] or [1]").data<float>()[0];
      scale = Tensor::empty({n}, DType::f32, kCPU);
      std::fill(scale.data<float>(), scale.data<float>() + n, value);
    }
    check_scale_values(scale, found->file, scale_name, /*zero_allowed=*/true);
    scales.emplace(module + ".weight_scale", scale.to(device));
    if (format.activation != Fp8ActivationScale::fixed) continue;
    const std::string input_name = module + ".input_scale";
    std::optional<FoundTensor> input = find(input_name);
    TESSERA_REQUIRE(input.has_value(),
                    "{}: FP8 tensor '{}' has no '{}' (the checkpoint's activations are static)",
                    where, name, input_name);
    scales.emplace(input_name, fixed_scale(*input, input_name).to(device));
  }
  TESSERA_REQUIRE(!format.enabled() || !scales.empty(),
                  "{}: config.json's quantization_config says {}, but no projection is stored as "
                  "F8_E4M3",
                  where, format.str());
  // The FP8 KV cache's scales: one each for K and V per layer (models/model.h kv_cache_scales).
  for (int64_t layer = 0; format.kv_cache_scales && layer < config.num_layers; ++layer) {
    for (const char* kind : {"k_scale", "v_scale"}) {
      const std::string scale_name = fmt::format("model.layers.{}.self_attn.{}", layer, kind);
      std::optional<FoundTensor> found = find(scale_name);
      TESSERA_REQUIRE(found.has_value(),
                      "{}: quantization_config has a kv_cache_scheme but the checkpoint has no "
                      "'{}'",
                      where, scale_name);
      scales.emplace(scale_name, fixed_scale(*found, scale_name).to(device));
    }
  }
  tensors.merge(scales);
}

void quantize_fp8_online(ModelWeights& weights, Fp8Format::WeightScale layout) {
  TESSERA_CHECK(layout != Fp8Format::WeightScale::tensor, "online FP8 per tensor");
  const bool block = layout == Fp8Format::WeightScale::block;
  if (weights.config.fp8.enabled()) return;  // FP8 already, scaled as its checkpoint says
  TESSERA_REQUIRE(weights.config.num_experts == 0,
                  "{}: --quantization fp8 of a mixture of experts ({}) is not supported yet: "
                  "fused_moe takes f32, f16 and bf16 experts; leave --quantization unset",
                  weights.source, weights.config.architecture);
  std::map<std::string, Tensor> scales;
  for (auto& [name, weight] : weights.tensors) {
    if (!is_projection_weight(name)) continue;
    TESSERA_REQUIRE(is_floating(weight.dtype()),
                    "{}: --quantization fp8 quantizes float weights, but '{}' is {} already; "
                    "leave --quantization unset for this model",
                    weights.source, name, dtype_name(weight.dtype()));
    TESSERA_CHECK(weight.device().is_cpu() && weight.dim() == 2, "online FP8 of {}", name);
    const int64_t n = weight.size(0), k = weight.size(1);
    const std::vector<float> values = weight.to_floats();
    Tensor codes = Tensor::empty({n, k}, DType::f8_e4m3, kCPU);
    // A scale per (row block, column block): rows of kFp8Block and all columns per channel.
    const int64_t rows = block ? kFp8Block : 1, columns = block ? kFp8Block : k;
    const int64_t row_blocks = (n + rows - 1) / rows, column_blocks = (k + columns - 1) / columns;
    Tensor scale = block ? Tensor::empty({row_blocks, column_blocks}, DType::f32, kCPU)
                         : Tensor::empty({n}, DType::f32, kCPU);
    auto* code = codes.data<uint8_t>();
    float* scales_out = scale.data<float>();
    cpu::parallel_for(row_blocks * column_blocks, block ? 1 : 16, [&](int64_t begin, int64_t end) {
      for (int64_t index = begin; index < end; ++index) {
        const int64_t row0 = index / column_blocks * rows, col0 = index % column_blocks * columns;
        const int64_t row_end = std::min(n, row0 + rows), col_end = std::min(k, col0 + columns);
        float amax = 0.0f;
        for (int64_t r = row0; r < row_end; ++r)
          for (int64_t c = col0; c < col_end; ++c)
            amax = std::max(amax, std::fabs(values[r * k + c]));
        const float inverse = fp8_dynamic_inverse(amax);
        scales_out[index] = fp8_dynamic_scale(amax);
        for (int64_t r = row0; r < row_end; ++r)
          for (int64_t c = col0; c < col_end; ++c)
            code[r * k + c] = Float8E4M3::from_float(values[r * k + c] * inverse);
      }
    });
    weight = codes;
    scales.emplace(projection_module(name) + ".weight_scale", scale);
  }
  weights.tensors.merge(scales);
  weights.config.fp8 = Fp8Format{
      "online", layout, block ? Fp8ActivationScale::group : Fp8ActivationScale::token, {}};
}

}  // namespace tessera::loaders
