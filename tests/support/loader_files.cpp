#include "support/loader_files.h"

#include <unistd.h>

#include <cstring>
#include <fstream>

#include "compile/ops/ops.h"
#include "models/input_file.h"
#include "models/loaders/gguf.h"
#include "models/loaders/safetensors.h"
#include "runtime/check.h"

namespace tessera::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  path_ = fs::temp_directory_path() / fmt::format("tessera_loaders_{}_{}_{}", ::getpid(),
                                                  test->test_suite_name(), test->name());
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  fs::remove_all(path_);
}

void expect_mentions(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

std::vector<char> read_bytes(const std::string& path) {
  // read_input_file throws naming a file it cannot read (a missing ../shared model), where an
  // empty vector would let a test cut bytes past its end.
  const std::string bytes = read_input_file(path, "test file");
  return std::vector<char>(bytes.begin(), bytes.end());
}

void write_bytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void write_text(const std::string& path, const std::string& text) {
  write_bytes(path, text.data(), text.size());
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const Tensor left = a.to(kCPU).contiguous();
  const Tensor right = b.to(kCPU).contiguous();
  return std::memcmp(left.data_ptr(), right.data_ptr(), left.nbytes()) == 0;
}

void expect_same_tensors(const ModelWeights& expected, const ModelWeights& actual) {
  ASSERT_EQ(expected.tensors.size(), actual.tensors.size())
      << expected.source << " vs " << actual.source;
  for (const auto& [name, tensor] : expected.tensors) {
    ASSERT_TRUE(actual.has(name)) << name << " missing from " << actual.source;
    EXPECT_TRUE(bit_identical(tensor, actual.get(name)))
        << name << ": " << expected.source << " differs from " << actual.source;
  }
}

// Every field but max_position_embeddings, which the GGUF converter sets to its own 2048.
void expect_same_architecture(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_FLOAT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.hidden_act, b.hidden_act);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.checkpoint_dtype, b.checkpoint_dtype);
}

// config.json for a ModelConfig, as transformers writes it.
nlohmann::json hf_config_json(const ModelConfig& config) {
  nlohmann::json json = {{"architectures", {config.architecture}},
                         {"vocab_size", config.vocab_size},
                         {"hidden_size", config.hidden_size},
                         {"intermediate_size", config.intermediate_size},
                         {"num_hidden_layers", config.num_layers},
                         {"num_attention_heads", config.num_heads},
                         {"num_key_value_heads", config.num_kv_heads},
                         {"head_dim", config.head_dim},
                         {"max_position_embeddings", config.max_position_embeddings},
                         {"rms_norm_eps", config.rms_norm_eps},
                         {"rope_theta", config.rope_theta},
                         {"rope_scaling", nullptr},
                         {"tie_word_embeddings", config.tie_word_embeddings},
                         {"hidden_act", config.hidden_act},
                         {"bos_token_id", config.bos_token_id},
                         {"eos_token_id", config.eos_token_ids},
                         {"torch_dtype", "float32"}};
  if (config.rope_scaling.type == "llama3")
    json["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", config.rope_scaling.factor},
        {"low_freq_factor", config.rope_scaling.low_freq_factor},
        {"high_freq_factor", config.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", config.rope_scaling.original_max_position_embeddings}};
  return json;
}

// An HF folder holding `weights` in one model.safetensors.
void write_hf_folder(const std::string& folder, const ModelWeights& weights,
                     const nlohmann::json& config) {
  fs::create_directories(folder);
  write_text(folder + "/config.json", config.dump(2));
  std::vector<std::pair<std::string, Tensor>> tensors(weights.tensors.begin(),
                                                      weights.tensors.end());
  loaders::save_safetensors(folder + "/model.safetensors", tensors);
}

// q/k rows from HF rotate_half order back to llama.cpp's adjacent pairs (its converter's permute).
Tensor to_rope_pairs(const Tensor& hf, int64_t head_dim) {
  const Tensor host = hf.to(kCPU).contiguous();
  Tensor pairs = Tensor::empty(host.sizes(), host.dtype(), kCPU);
  const int64_t rows = host.size(0);
  const size_t row_bytes = host.nbytes() / static_cast<size_t>(rows);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t stored = loaders::rope_pairs_source_row(row, head_dim);
    std::memcpy(static_cast<char*>(pairs.data_ptr()) + stored * row_bytes,
                static_cast<const char*>(host.data_ptr()) + row * row_bytes, row_bytes);
  }
  return pairs;
}

// A GGUF file of a llama-architecture model holding `weights` the way llama.cpp stores them
// (Mixtral as llama with experts; Qwen3-MoE as qwen3moe, q/k in HF order with their norms).
GgufWriter llama_gguf(const ModelWeights& weights, const GgufChanges& changes) {
  const ModelConfig& config = weights.config;
  const bool qwen3moe = config.architecture == "Qwen3MoeForCausalLM";
  const std::string arch = qwen3moe ? "qwen3moe" : "llama";
  auto key = [&](const char* name) { return arch + "." + name; };
  GgufWriter writer;
  writer.apply(changes.ggml_types, changes.omitted);
  writer.add_string("general.architecture", arch);
  writer.add_u32(key("embedding_length"), static_cast<uint32_t>(config.hidden_size));
  writer.add_u32(key("block_count"), static_cast<uint32_t>(config.num_layers));
  writer.add_u32(key("feed_forward_length"), static_cast<uint32_t>(config.intermediate_size));
  writer.add_u32(key("attention.head_count"), static_cast<uint32_t>(config.num_heads));
  writer.add_u32(key("attention.head_count_kv"), static_cast<uint32_t>(config.num_kv_heads));
  if (config.head_dim * config.num_heads != config.hidden_size)
    writer.add_u32(key("attention.key_length"), static_cast<uint32_t>(config.head_dim));
  writer.add_u32(key("context_length"), static_cast<uint32_t>(config.max_position_embeddings));
  writer.add_f32(key("rope.freq_base"), static_cast<float>(config.rope_theta));
  writer.add_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(config.rms_norm_eps));
  if (config.num_experts > 0) {
    writer.add_u32(key("expert_count"), static_cast<uint32_t>(config.num_experts));
    writer.add_u32(key("expert_used_count"), static_cast<uint32_t>(config.num_experts_per_tok));
    if (qwen3moe)
      writer.add_u32(key("expert_feed_forward_length"),
                     static_cast<uint32_t>(config.moe_intermediate_size));
  }
  std::vector<std::string> tokens;
  for (int64_t i = 0; i < config.vocab_size; ++i) tokens.push_back(fmt::format("t{}", i));
  writer.add_string("tokenizer.ggml.model", "llama");
  writer.add_strings("tokenizer.ggml.tokens", tokens);
  writer.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(config.bos_token_id));
  writer.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(config.eos_token_ids[0]));
  writer.add_tensor("token_embd.weight", weights.get("model.embed_tokens.weight"));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    auto hf = [&](const char* name) {
      return weights.get(fmt::format("model.layers.{}.{}", layer, name));
    };
    auto gguf = [&](const char* name) { return fmt::format("blk.{}.{}", layer, name); };
    writer.add_tensor(gguf("attn_norm.weight"), hf("input_layernorm.weight"));
    for (const auto& [stored, name] : {std::pair{"attn_q.weight", "self_attn.q_proj.weight"},
                                       {"attn_k.weight", "self_attn.k_proj.weight"}})
      writer.add_tensor(gguf(stored),
                        qwen3moe ? hf(name) : to_rope_pairs(hf(name), config.head_dim));
    if (config.qk_norm) {
      writer.add_tensor(gguf("attn_q_norm.weight"), hf("self_attn.q_norm.weight"));
      writer.add_tensor(gguf("attn_k_norm.weight"), hf("self_attn.k_norm.weight"));
    }
    writer.add_tensor(gguf("attn_v.weight"), hf("self_attn.v_proj.weight"));
    writer.add_tensor(gguf("attn_output.weight"), hf("self_attn.o_proj.weight"));
    writer.add_tensor(gguf("ffn_norm.weight"), hf("post_attention_layernorm.weight"));
    if (config.layer_has_experts(layer)) {
      // The router, and each projection of every expert stacked: [experts, rows, columns].
      const std::string moe = qwen3moe ? "mlp." : "block_sparse_moe.";
      writer.add_tensor(gguf("ffn_gate_inp.weight"), hf((moe + "gate.weight").c_str()));
      const std::pair<const char*, std::string> stacks[] = {
          {"ffn_gate_exps.weight", qwen3moe ? "gate_proj" : "w1"},
          {"ffn_up_exps.weight", qwen3moe ? "up_proj" : "w3"},
          {"ffn_down_exps.weight", qwen3moe ? "down_proj" : "w2"}};
      for (const auto& [stored, projection] : stacks) {
        std::vector<Tensor> experts;
        for (int64_t e = 0; e < config.num_experts; ++e)
          experts.push_back(hf(fmt::format("{}experts.{}.{}.weight", moe, e, projection).c_str()));
        const Shape matrix = experts[0].sizes();
        writer.add_tensor(gguf(stored), ops::reshape(ops::cat(experts, 0),
                                                     {config.num_experts, matrix[0], matrix[1]}));
      }
    } else {
      writer.add_tensor(gguf("ffn_gate.weight"), hf("mlp.gate_proj.weight"));
      writer.add_tensor(gguf("ffn_down.weight"), hf("mlp.down_proj.weight"));
      writer.add_tensor(gguf("ffn_up.weight"), hf("mlp.up_proj.weight"));
    }
  }
  writer.add_tensor("output_norm.weight", weights.get("model.norm.weight"));
  if (!config.tie_word_embeddings)
    writer.add_tensor("output.weight", weights.get("lm_head.weight"));
  return writer;
}

HfTinyExpected read_hf_tiny_expected(const std::string& folder) {
  nlohmann::json expected;
  std::ifstream(folder + "/expected.json") >> expected;
  return {expected["input_ids"].get<std::vector<int32_t>>(),
          expected["logits"].get<std::vector<std::vector<double>>>()};
}

}  // namespace tessera::testing
