// Synthetic models: named configs with deterministic random weights. Each element is a hash of
// (seed, tensor name, index), so values are reproducible on any thread count and the same
// tensor name gets the same values in any model that has it. Weights are generated directly in
// the run dtype, one tensor at a time, and moved to the run device.
#include "models/loaders/synthetic.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "kernels/quant/block_format.h"
#include "models/architecture_registry.h"
#include "models/loaders/expected_weights.h"
#include "models/loaders/fp8_weights.h"
#include "models/loaders/loaders.h"
#include "models/mixture_of_experts.h"
#include "runtime/check.h"
#include "runtime/cpu/parallel.h"

namespace tessera::loaders {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t name_hash(const std::string& name) {  // FNV-1a: stable across platforms and runs
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : name) hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return hash;
}

// Uniform in [-1, 1) from the top 24 bits of a hash.
float uniform_symmetric(uint64_t bits) {
  return static_cast<float>(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

bool is_norm_weight(const std::string& name) {
  return name.find("norm.weight") != std::string::npos;
}

// Fills a host tensor of any float dtype with center + spread * U[-1, 1).
void fill_uniform(Tensor& host, uint64_t stream, float center, float spread) {
  visit_dtype(host.dtype(), [&]<typename T>() {
    if constexpr (!std::is_integral_v<T>) {
      T* out = host.data<T>();
      cpu::parallel_for(host.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          out[i] =
              T(center + spread * uniform_symmetric(splitmix64(stream + static_cast<uint64_t>(i))));
      });
    }
  });
}

ModelConfig tiny_llama() {
  ModelConfig config;
  config.architecture = "LlamaForCausalLM";
  config.vocab_size = 512;
  config.hidden_size = 64;
  config.intermediate_size = 172;
  config.num_layers = 2;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.head_dim = 16;
  config.max_position_embeddings = 2048;
  config.rms_norm_eps = 1e-5;
  config.rope_theta = 10000.0;
  config.tie_word_embeddings = false;  // the tiny llama exercises a separate lm_head
  config.bos_token_id = 1;
  config.eos_token_ids = {2};
  return config;
}

// A llama whose rows are whole super-blocks of 256, so every weight format can hold it.
ModelConfig small_llama() {
  ModelConfig config = tiny_llama();
  config.hidden_size = 256;
  config.intermediate_size = 768;
  config.num_layers = 4;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.head_dim = 64;
  config.tie_word_embeddings = true;
  return config;
}

ModelConfig llama_1b() {  // Llama-3.2-1B's config.json
  ModelConfig config;
  config.architecture = "LlamaForCausalLM";
  config.vocab_size = 128256;
  config.hidden_size = 2048;
  config.intermediate_size = 8192;
  config.num_layers = 16;
  config.num_heads = 32;
  config.num_kv_heads = 8;
  config.head_dim = 64;
  config.max_position_embeddings = 131072;
  config.rms_norm_eps = 1e-5;
  config.rope_theta = 500000.0;
  config.rope_scaling = RopeScaling{"llama3", 32.0, 1.0, 4.0, 8192};
  config.tie_word_embeddings = true;
  config.bos_token_id = 128000;
  config.eos_token_ids = {128001};
  config.checkpoint_dtype = DType::bf16;
  return config;
}

// Llama-3.1-8B's shape (hidden 4096, 32 layers, 32/8 heads, intermediate 14336): a model that
// wants two GPUs' memory bandwidth, for the tensor-parallel benchmark.
ModelConfig llama_8b() {
  ModelConfig config = llama_1b();
  config.hidden_size = 4096;
  config.intermediate_size = 14336;
  config.num_layers = 32;
  config.num_heads = 32;
  config.num_kv_heads = 8;
  config.head_dim = 128;
  config.rope_theta = 500000.0;
  config.tie_word_embeddings = false;
  return config;
}

ModelConfig qwen3_tiny() {
  ModelConfig config = tiny_llama();
  config.architecture = "Qwen3ForCausalLM";
  config.head_dim = 32;  // not hidden/heads, as in real Qwen3 configs
  config.qk_norm = true;
  config.tie_word_embeddings = true;
  config.rope_theta = 1000000.0;
  config.rms_norm_eps = 1e-6;
  config.max_position_embeddings = 4096;
  return config;
}

// Qwen3-0.6B's config.json: per-head q/k norms between the qkv slices and the rope, so its
// layers keep rope and attention apart (the rotary attention pass cannot fold them).
ModelConfig qwen3_0_6b() {
  ModelConfig config;
  config.architecture = "Qwen3ForCausalLM";
  config.vocab_size = 151936;
  config.hidden_size = 1024;
  config.intermediate_size = 3072;
  config.num_layers = 28;
  config.num_heads = 16;
  config.num_kv_heads = 8;
  config.head_dim = 128;
  config.qk_norm = true;
  config.max_position_embeddings = 40960;
  config.rms_norm_eps = 1e-6;
  config.rope_theta = 1000000.0;
  config.tie_word_embeddings = true;
  config.bos_token_id = 151643;
  config.eos_token_ids = {151645};
  config.checkpoint_dtype = DType::bf16;
  return config;
}

// A tiny Qwen3-MoE: 8 experts of 32 in each of its 2 layers, 2 per token.
ModelConfig qwen3_moe_tiny() {
  ModelConfig config = qwen3_tiny();
  config.architecture = "Qwen3MoeForCausalLM";
  config.num_experts = 8;
  config.num_experts_per_tok = 2;
  config.moe_intermediate_size = 32;
  config.norm_topk_prob = true;
  config.tie_word_embeddings = false;
  config.expert_layers.assign(static_cast<size_t>(config.num_layers), true);
  return config;
}

// Qwen3-30B-A3B's config.json: 128 experts of 768 in every layer, 8 per token (30.5B
// parameters, 3.3B active per token), for the mixture-of-experts benchmarks.
ModelConfig qwen3_30b_a3b() {
  ModelConfig config = qwen3_0_6b();
  config.architecture = "Qwen3MoeForCausalLM";
  config.hidden_size = 2048;
  config.intermediate_size = 6144;
  config.num_layers = 48;
  config.num_heads = 32;
  config.num_kv_heads = 4;
  config.head_dim = 128;
  config.tie_word_embeddings = false;
  config.num_experts = 128;
  config.num_experts_per_tok = 8;
  config.moe_intermediate_size = 768;
  config.norm_topk_prob = true;
  config.expert_layers.assign(static_cast<size_t>(config.num_layers), true);
  return config;
}

ModelConfig qwen2_tiny() {
  ModelConfig config = tiny_llama();
  config.architecture = "Qwen2ForCausalLM";
  config.attention_bias = true;
  config.tie_word_embeddings = true;
  config.rope_theta = 1000000.0;
  config.rms_norm_eps = 1e-6;
  config.max_position_embeddings = 4096;
  return config;
}

const std::vector<std::pair<std::string, ModelConfig (*)()>>& named_configs() {
  static const std::vector<std::pair<std::string, ModelConfig (*)()>> configs = {
      {"tiny", tiny_llama},
      {"small", small_llama},
      {"llama-1b", llama_1b},
      {"llama-8b", llama_8b},
      {"qwen3-tiny", qwen3_tiny},
      {"qwen3-0.6b", qwen3_0_6b},
      {"qwen2-tiny", qwen2_tiny},
      {"qwen3-moe-tiny", qwen3_moe_tiny},
      {"qwen3-30b-a3b", qwen3_30b_a3b}};
  return configs;
}

// llama.cpp's file types that Tessera writes, as the suffix of a synthetic name, and fp8_block:
// the projections in e4m3 with 128x128 block scales (the form of Qwen3-*-FP8 checkpoints).
constexpr std::string_view kSyntheticFileTypes[] = {"q8_0", "q6_k", "q4_k_m", "fp8_block"};
constexpr std::string_view kFp8Block = "fp8_block";

struct SyntheticName {
  std::string shape;      // "llama-1b"
  std::string file_type;  // "" (the run dtype) or one of kSyntheticFileTypes
};

SyntheticName parse_synthetic_name(const std::string& name) {
  const size_t colon = name.find(':');
  if (colon == std::string::npos) return {name, ""};
  SyntheticName parsed{name.substr(0, colon), name.substr(colon + 1)};
  TESSERA_REQUIRE(std::find(std::begin(kSyntheticFileTypes), std::end(kSyntheticFileTypes),
                            parsed.file_type) != std::end(kSyntheticFileTypes),
                  "synthetic:{}: unknown weight format '{}'; known: {}", name, parsed.file_type,
                  fmt::join(kSyntheticFileTypes, ", "));
  return parsed;
}

// The layer of a "model.layers.N." weight, or -1.
int64_t layer_of(const std::string& weight) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (weight.rfind(kPrefix, 0) != 0) return -1;
  return std::stoll(weight.substr(kPrefix.size()));
}

// Where llama.cpp's mixture puts its formats (llama_tensor_get_type): Q4_K_M gives the output
// weight (the embedding when tied) and, in the first and last eighth of the layers and every third
// between, attention's v and the MLP's down projection Q6_K, everything else Q4_K. Norms and
// the routers of mixtures of experts stay in the run dtype.
DType weight_format(const std::string& file_type, const WeightSpec& spec, const ModelConfig& config,
                    DType run_dtype) {
  if (file_type.empty() || file_type == kFp8Block || spec.shape.size() != 2 ||
      is_router_weight(spec.name))
    return run_dtype;
  if (file_type == "q8_0") return DType::q8_0;
  if (file_type == "q6_k") return DType::q6_k;
  const bool output = spec.name == "lm_head.weight" ||
                      (config.tie_word_embeddings && spec.name == "model.embed_tokens.weight");
  if (output) return DType::q6_k;
  const int64_t layer = layer_of(spec.name), layers = config.num_layers;
  const bool more_bits = layer >= 0 && (layer < layers / 8 || layer >= 7 * layers / 8 ||
                                        (layer - layers / 8) % 3 == 2);
  const bool sensitive = spec.name.find("v_proj") != std::string::npos ||
                         spec.name.find("down_proj") != std::string::npos;
  return more_bits && sensitive ? DType::q6_k : DType::q4_k;
}

// The host tensor of `format` holding `values` (f32), quantized a row at a time.
Tensor quantized_tensor(const Tensor& values, DType format, const std::string& name) {
  const int64_t rows = values.size(0), columns = values.size(1);
  TESSERA_REQUIRE(columns % block_elements(format) == 0,
                  "synthetic weight '{}' has rows of {}, not whole {} blocks of {}", name, columns,
                  dtype_name(format), block_elements(format));
  Tensor quantized = Tensor::empty({rows, columns}, format, kCPU);
  const int64_t blocks_per_row = columns / block_elements(format);
  const size_t row_bytes = static_cast<size_t>(storage_bytes(format, columns));
  const float* source = values.data<float>();
  auto* out = static_cast<std::byte*>(quantized.data_ptr());
  cpu::parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row)
      quant::quantize_blocks(format, source + row * columns, out + row * row_bytes, blocks_per_row);
  });
  return quantized;
}

}  // namespace

std::vector<std::string> synthetic_model_names() {
  std::vector<std::string> names;
  for (const auto& [name, make] : named_configs()) names.push_back(name);
  return names;
}

ModelConfig synthetic_config(const std::string& name) {
  const std::string shape = parse_synthetic_name(name).shape;
  for (const auto& [known, make] : named_configs())
    if (known == shape) {
      ModelConfig config = make();
      config.validate("synthetic:" + name);
      return config;
    }
  throw Error(fmt::format("synthetic:{}: unknown synthetic model; known: {}", name,
                          fmt::join(synthetic_model_names(), ", ")));
}

ModelWeights load_synthetic(const std::string& name, const LoadOptions& options) {
  TESSERA_REQUIRE(is_floating(options.dtype),
                  "synthetic:{}: the run dtype must be f32, f16 or bf16, got {}", name,
                  dtype_name(options.dtype));
  ModelWeights weights;
  weights.source = "synthetic:" + name;
  weights.config = synthetic_config(name);
  weights.config.checkpoint_dtype = options.dtype;      // generated in the run dtype
  const float linear_spread = 0.02f * std::sqrt(3.0f);  // U[-a, a] with standard deviation 0.02
  const std::string file_type = parse_synthetic_name(name).file_type;
  // FP8 blocks are quantized on the host from the float weights, then moved.
  const Device device = file_type == kFp8Block ? kCPU : options.device;
  for (const WeightSpec& spec : expected_weights(weights.config)) {
    const DType format = weight_format(file_type, spec, weights.config, options.dtype);
    Tensor host = Tensor::empty(spec.shape, is_quantized(format) ? DType::f32 : format, kCPU);
    const uint64_t stream = splitmix64(kSyntheticSeed ^ name_hash(spec.name));
    if (is_norm_weight(spec.name)) {
      fill_uniform(host, stream, 1.0f, 0.1f);  // near 1, not exactly, so a mix-up shows
    } else {
      fill_uniform(host, stream, 0.0f, linear_spread);
    }
    if (is_quantized(format)) host = quantized_tensor(host, format, spec.name);
    weights.tensors.emplace(spec.name, host.to(device));
  }
  if (file_type == kFp8Block) {
    quantize_fp8_online(weights, Fp8Format::WeightScale::block);
    for (auto& [weight_name, tensor] : weights.tensors) tensor = tensor.to(options.device);
  }
  return weights;
}

}  // namespace tessera::loaders
