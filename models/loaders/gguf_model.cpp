// Models from GGUF files: architecture metadata to a ModelConfig, GGUF tensor names to Hugging
// Face names. llama.cpp's converter stores llama q/k rows in adjacent-pair RoPE order (its
// permute); they are reordered back to rotate_half here, exactly as for llama2.c. qwen2/qwen3 use
// NeoX-style RoPE in llama.cpp, so their rows are already in HF order.
#include <spdlog/spdlog.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <optional>

#include "models/loaders/expected_weights.h"
#include "models/loaders/gguf.h"
#include "models/loaders/loaders.h"
#include "models/mixture_of_experts.h"
#include "runtime/check.h"

namespace tessera::loaders {
namespace {

struct GgufArchitecture {
  const char* gguf_name;
  const char* hf_name;
  bool rope_pairs;  // q/k stored in adjacent-pair order
};

constexpr GgufArchitecture kArchitectures[] = {
    {"llama", "LlamaForCausalLM", true},
    {"qwen2", "Qwen2ForCausalLM", false},
    {"qwen3", "Qwen3ForCausalLM", false},
    {"qwen3moe", "Qwen3MoeForCausalLM", false},
};

// The llama3 frequency factors llama.cpp's converter writes as rope_freqs.weight (one per
// rotary pair), computed as transformers' _compute_llama3_parameters does.
std::vector<double> llama3_rope_factors(const RopeScaling& scaling, double theta,
                                        int64_t head_dim) {
  const double low_wavelength =
      static_cast<double>(scaling.original_max_position_embeddings) / scaling.low_freq_factor;
  const double high_wavelength =
      static_cast<double>(scaling.original_max_position_embeddings) / scaling.high_freq_factor;
  std::vector<double> factors;
  for (int64_t i = 0; i < head_dim; i += 2) {
    const double frequency = 1.0 / std::pow(theta, static_cast<double>(i) / head_dim);
    const double wavelength = 2 * std::numbers::pi / frequency;
    if (wavelength < high_wavelength) {
      factors.push_back(1.0);
    } else if (wavelength > low_wavelength) {
      factors.push_back(scaling.factor);
    } else {
      const double smooth =
          (static_cast<double>(scaling.original_max_position_embeddings) / wavelength -
           scaling.low_freq_factor) /
          (scaling.high_freq_factor - scaling.low_freq_factor);
      factors.push_back(1.0 / ((1 - smooth) / scaling.factor + smooth));
    }
  }
  return factors;
}

// GGUF keeps llama3 RoPE scaling only as the rope_freqs.weight table. Recover the parameters:
// the factor is the table's maximum; low/high/original take Llama 3's values (1, 4, 8192), and
// the table must match what they produce, else the file is refused.
RopeScaling recover_llama3_scaling(const GgufFile& file, const GgufTensorInfo& info,
                                   const ModelConfig& config) {
  TESSERA_REQUIRE(config.head_dim >= 2,
                  "{}: head_dim is {} (from the attention key length or the embedding length "
                  "over the head count); llama3 RoPE scaling needs at least 2",
                  file.path(), config.head_dim);
  const StoredTensor stored_table = file.stored(info);
  TESSERA_REQUIRE(is_floating(stored_table.dtype),
                  "{}: tensor 'rope_freqs.weight' is stored as {}; it must be F32, F16 or BF16",
                  file.path(), dtype_name(stored_table.dtype));
  const Tensor table = materialize(stored_table, LoadOptions{});
  const std::vector<float> stored = table.to_floats();
  TESSERA_REQUIRE(static_cast<int64_t>(stored.size()) == config.head_dim / 2,
                  "{}: tensor 'rope_freqs.weight' has {} entries, expected head_dim/2 = {}",
                  file.path(), stored.size(), config.head_dim / 2);
  RopeScaling scaling;
  scaling.type = "llama3";
  scaling.factor = *std::max_element(stored.begin(), stored.end());
  scaling.original_max_position_embeddings = file.get_int_or(
      "llama.rope.scaling.original_context_length", scaling.original_max_position_embeddings);
  const std::vector<double> expected =
      llama3_rope_factors(scaling, config.rope_theta, config.head_dim);
  for (size_t i = 0; i < stored.size(); ++i)
    TESSERA_REQUIRE(std::abs(stored[i] - expected[i]) <= 1e-3 * std::abs(expected[i]),
                    "{}: tensor 'rope_freqs.weight' entry {} is {} but llama3 scaling (factor {}, "
                    "low 1, high 4, original {}) gives {}; this RoPE scaling is not supported",
                    file.path(), i, stored[i], scaling.factor,
                    scaling.original_max_position_embeddings, expected[i]);
  return scaling;
}

// Tied when output.weight is absent, or when it is a byte-for-byte copy of token_embd.weight
// (llama.cpp's llama2.c converter writes the shared classifier out twice); a copy is not loaded.
bool output_is_embedding(const GgufFile& file) {
  const GgufTensorInfo* output = file.find_tensor("output.weight");
  if (output == nullptr) return true;
  const GgufTensorInfo* embedding = file.find_tensor("token_embd.weight");
  if (embedding == nullptr || embedding->ggml_type != output->ggml_type ||
      embedding->shape != output->shape || !ggml_type_dtype(output->ggml_type))
    return false;
  const StoredTensor a = file.stored(*embedding);
  const StoredTensor b = file.stored(*output);
  const size_t bytes = static_cast<size_t>(storage_bytes(a.dtype, shape_numel(a.shape)));
  return std::memcmp(a.data, b.data, bytes) == 0;
}

ModelConfig config_from_metadata(const GgufFile& file, const GgufArchitecture& architecture) {
  const std::string prefix = std::string(architecture.gguf_name) + ".";
  auto key = [&](const char* name) { return prefix + name; };
  ModelConfig config;
  config.architecture = architecture.hf_name;
  config.hidden_size = file.get_int(key("embedding_length"));
  config.num_layers = file.get_int(key("block_count"));
  config.intermediate_size = file.get_int(key("feed_forward_length"));
  config.num_heads = file.get_int(key("attention.head_count"));
  config.num_kv_heads = file.get_int_or(key("attention.head_count_kv"), config.num_heads);
  TESSERA_REQUIRE(config.num_heads > 0, "{}: metadata '{}' must be positive", file.path(),
                  key("attention.head_count"));
  config.head_dim =
      file.get_int_or(key("attention.key_length"), config.hidden_size / config.num_heads);
  const int64_t rotary_dims = file.get_int_or(key("rope.dimension_count"), config.head_dim);
  TESSERA_REQUIRE(rotary_dims == config.head_dim,
                  "{}: metadata '{}' = {} rotates part of each head (head_dim {}); partial rotary "
                  "embeddings are not supported",
                  file.path(), key("rope.dimension_count"), rotary_dims, config.head_dim);
  config.rope_theta = file.get_float_or(key("rope.freq_base"), 10000.0);
  config.rms_norm_eps = file.get_float_or(key("attention.layer_norm_rms_epsilon"), 1e-5);
  config.max_position_embeddings =
      file.get_int_or(key("context_length"), config.max_position_embeddings);
  if (file.has(key("vocab_size"))) {
    config.vocab_size = file.get_int(key("vocab_size"));
  } else if (file.has("tokenizer.ggml.tokens")) {
    config.vocab_size = static_cast<int64_t>(file.array_size("tokenizer.ggml.tokens"));
  } else if (const GgufTensorInfo* embedding = file.find_tensor("token_embd.weight")) {
    config.vocab_size = embedding->shape[0];
  }
  const std::string scaling_type = file.get_string_or(key("rope.scaling.type"), "none");
  TESSERA_REQUIRE(scaling_type == "none",
                  "{}: metadata '{}' = '{}' is not supported; supported: none, or llama3 "
                  "(rope_freqs.weight)",
                  file.path(), key("rope.scaling.type"), scaling_type);
  config.tie_word_embeddings = output_is_embedding(file);
  config.attention_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  config.qk_norm = file.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  config.bos_token_id = file.get_int_or("tokenizer.ggml.bos_token_id", -1);
  if (file.has("tokenizer.ggml.eos_token_id"))
    config.eos_token_ids = {file.get_int("tokenizer.ggml.eos_token_id")};
  if (const GgufTensorInfo* embedding = file.find_tensor("token_embd.weight"))
    if (std::optional<DType> dtype = ggml_type_dtype(embedding->ggml_type))
      if (is_floating(*dtype)) config.checkpoint_dtype = *dtype;  // quantized: the run's default
  // Mixtures of experts: llama with experts is Mixtral. A layer has experts where it has a router
  // (blk.N.ffn_gate_inp). llama.cpp always renormalizes the chosen experts' weights for both
  // families, whatever the checkpoint's norm_topk_prob was, and so does this loader.
  config.num_experts = file.get_int_or(key("expert_count"), 0);
  if (config.num_experts > 0) {
    if (config.architecture == std::string("LlamaForCausalLM"))
      config.architecture = "MixtralForCausalLM";
    config.num_experts_per_tok = file.get_int(key("expert_used_count"));
    config.moe_intermediate_size =
        file.get_int_or(key("expert_feed_forward_length"), config.intermediate_size);
    config.norm_topk_prob = true;
    TESSERA_REQUIRE(config.num_layers >= 0 && config.num_layers <= (int64_t{1} << 12),
                    "{}: metadata '{}' is {}, more than Tessera accepts", file.path(),
                    key("block_count"), config.num_layers);
    for (int64_t layer = 0; layer < config.num_layers; ++layer)
      config.expert_layers.push_back(
          file.find_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", layer)) != nullptr);
  }
  config.check_limits(file.path());
  if (const GgufTensorInfo* table = file.find_tensor("rope_freqs.weight"))
    config.rope_scaling = recover_llama3_scaling(file, *table, config);
  return config;
}

// An expert's projection inside llama.cpp's stacked tensor of a layer's experts
// ("blk.N.ffn_gate_exps.weight", [experts, rows, columns]).
struct ExpertSlice {
  std::string stacked;
  int64_t expert;
};

std::optional<ExpertSlice> expert_slice(const std::string& hf_name) {
  const std::optional<ExpertWeightName> parsed = parse_expert_weight(hf_name);
  if (!parsed) return std::nullopt;
  const char* stacked = parsed->projection == ExpertProjection::gate ? "ffn_gate_exps.weight"
                        : parsed->projection == ExpertProjection::up ? "ffn_up_exps.weight"
                                                                     : "ffn_down_exps.weight";
  return ExpertSlice{fmt::format("blk.{}.{}", parsed->layer, stacked), parsed->expert};
}

// The GGUF name of a Hugging Face weight name.
std::string gguf_name(const std::string& hf_name) {
  static const std::pair<const char*, const char*> global[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  for (const auto& [hf, gguf] : global)
    if (hf_name == hf) return gguf;
  static const std::pair<const char*, const char*> per_layer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"}};
  int layer = -1;
  int consumed = 0;
  if (std::sscanf(hf_name.c_str(), "model.layers.%d.%n", &layer, &consumed) == 1 && consumed > 0) {
    const std::string rest = hf_name.substr(static_cast<size_t>(consumed));
    for (const auto& [hf, gguf] : per_layer)
      if (rest == hf) return fmt::format("blk.{}.{}", layer, gguf);
  }
  TESSERA_CHECK(false, "no GGUF name for weight '{}'", hf_name);
  return {};
}

}  // namespace

ModelWeights load_gguf_model(const std::string& path, const LoadOptions& options) {
  GgufFile file(path);
  const std::string architecture_name = file.get_string("general.architecture");
  const GgufArchitecture* architecture = nullptr;
  for (const GgufArchitecture& candidate : kArchitectures)
    if (architecture_name == candidate.gguf_name) architecture = &candidate;
  if (architecture == nullptr) {
    std::vector<std::string> names;
    for (const GgufArchitecture& candidate : kArchitectures) names.push_back(candidate.gguf_name);
    throw Error(fmt::format("{}: general.architecture '{}' is not supported; supported: {}", path,
                            architecture_name, fmt::join(names, ", ")));
  }

  ModelWeights weights;
  weights.source = path;
  weights.config = config_from_metadata(file, *architecture);
  weights.config.validate(path);
  auto find = [&](const WeightSpec& spec) -> std::optional<FoundTensor> {
    const std::optional<ExpertSlice> slice = expert_slice(spec.name);
    const std::string name = slice ? slice->stacked : gguf_name(spec.name);
    const GgufTensorInfo* info = file.find_tensor(name);
    if (info == nullptr) throw_missing_tensor(weights.config, path, spec, name);
    FoundTensor found;
    found.file = path;
    found.stored_name = name;
    if (slice) {
      // One expert's matrix: the stacked tensor's [experts, rows, columns] are whole matrices.
      TESSERA_REQUIRE(info->shape.size() == 3 && info->shape[0] == weights.config.num_experts,
                      "{}: tensor '{}' has shape {} but should stack {} experts' matrices", path,
                      name, shape_str(info->shape), weights.config.num_experts);
      found.stored_name = fmt::format("{} (expert {})", name, slice->expert);
    }
    if (ggml_type_dtype(info->ggml_type)) {
      found.stored = file.stored(*info);
      if (slice) {
        const Shape matrix{found.stored.shape[1], found.stored.shape[2]};
        found.stored.data += slice->expert * storage_bytes(found.stored.dtype, shape_numel(matrix));
        found.stored.shape = matrix;
      }
    } else {
      found.stored.shape = slice ? Shape{info->shape[1], info->shape[2]} : info->shape;
      found.stored_dtype_name = ggml_type_name(info->ggml_type);
      found.readable_dtype_names = readable_ggml_types();
    }
    return found;
  };
  weights.tensors =
      load_expected_weights(weights.config, path, find, options, architecture->rope_pairs);
  return weights;
}

}  // namespace tessera::loaders
