// Karpathy's llama2.c legacy checkpoint: a 7 x int32 header, then float32 tensors in a fixed
// order. Mapped to Hugging Face names (w1 = gate, w2 = down, w3 = up); wq/wk rows go from
// llama2.c's adjacent-pair RoPE to HF's rotate_half order.
#include <cstring>

#include "models/loaders/expected_weights.h"
#include "models/loaders/loaders.h"
#include "models/loaders/mapped_file.h"
#include "runtime/check.h"

namespace tessera::loaders {
namespace {

constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);

struct Llama2cHeader {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

ModelConfig config_from_header(const Llama2cHeader& header, const std::string& path) {
  const std::pair<const char*, int32_t> fields[] = {
      {"dim", header.dim},         {"hidden_dim", header.hidden_dim}, {"n_layers", header.n_layers},
      {"n_heads", header.n_heads}, {"n_kv_heads", header.n_kv_heads}, {"seq_len", header.seq_len}};
  for (const auto& [name, value] : fields)
    TESSERA_REQUIRE(value > 0,
                    "{}: llama2.c header field {} is {}; is this a llama2.c legacy "
                    "checkpoint (7 int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, "
                    "vocab_size, seq_len)?",
                    path, name, value);
  TESSERA_REQUIRE(header.vocab_size != 0, "{}: llama2.c header field vocab_size is 0", path);
  TESSERA_REQUIRE(header.dim % header.n_heads == 0,
                  "{}: llama2.c header: dim {} is not a multiple of n_heads {}", path, header.dim,
                  header.n_heads);
  ModelConfig config;
  config.architecture = "LlamaForCausalLM";
  config.vocab_size = std::abs(static_cast<int64_t>(header.vocab_size));
  config.hidden_size = header.dim;
  config.intermediate_size = header.hidden_dim;
  config.num_layers = header.n_layers;
  config.num_heads = header.n_heads;
  config.num_kv_heads = header.n_kv_heads;
  config.head_dim = header.dim / header.n_heads;
  config.max_position_embeddings = header.seq_len;
  config.rms_norm_eps = 1e-5;  // llama2.c run.c's constant
  config.rope_theta = 10000.0;
  config.tie_word_embeddings = header.vocab_size > 0;  // negative: a classifier follows
  config.bos_token_id = 1;
  config.eos_token_ids = {2};
  config.checkpoint_dtype = DType::f32;
  config.validate(path);
  return config;
}

// One tensor of the file, stacked over the layers when per_layer.
struct Section {
  std::string name;  // llama2.c's name, for messages
  bool per_layer;
  Shape shape;        // of one layer's slice
  size_t offset = 0;  // byte offset in the file, filled in order
};

}  // namespace

ModelWeights load_llama2c(const std::string& path, const LoadOptions& options) {
  MappedFile file(path);
  TESSERA_REQUIRE(file.size() >= kHeaderBytes,
                  "{}: {} bytes is shorter than the llama2.c header (7 int32 = 28 bytes)", path,
                  file.size());
  Llama2cHeader header;
  std::memcpy(&header, file.data(), kHeaderBytes);
  ModelWeights weights;
  weights.source = path;
  weights.config = config_from_header(header, path);
  const ModelConfig& config = weights.config;

  const int64_t dim = config.hidden_size;
  const int64_t kv_dim = config.num_kv_heads * config.head_dim;
  const int64_t hidden = config.intermediate_size;
  const int64_t layers = config.num_layers;
  std::vector<Section> sections = {
      {"token_embedding_table", false, {config.vocab_size, dim}},
      {"rms_att_weight", true, {dim}},
      {"wq", true, {dim, dim}},
      {"wk", true, {kv_dim, dim}},
      {"wv", true, {kv_dim, dim}},
      {"wo", true, {dim, dim}},
      {"rms_ffn_weight", true, {dim}},
      {"w1", true, {hidden, dim}},
      {"w2", true, {dim, hidden}},
      {"w3", true, {hidden, dim}},
      {"rms_final_weight", false, {dim}},
      // RoPE tables llama2.c no longer reads; skipped.
      {"freq_cis_real", false, {header.seq_len * config.head_dim / 2}},
      {"freq_cis_imag", false, {header.seq_len * config.head_dim / 2}},
  };
  if (!config.tie_word_embeddings) sections.push_back({"wcls", false, {config.vocab_size, dim}});

  size_t offset = kHeaderBytes;
  for (Section& section : sections) {
    section.offset = offset;
    // In double first: a garbage header can make the product overflow 64 bits.
    const double wanted = static_cast<double>(section.per_layer ? layers : 1) *
                          static_cast<double>(shape_numel(section.shape)) * 4.0;
    const size_t bytes =
        wanted > static_cast<double>(file.size()) ? file.size() + 1 : static_cast<size_t>(wanted);
    TESSERA_REQUIRE(offset + bytes <= file.size(),
                    "{}: the file ends inside tensor '{}' (it needs {:.0f} bytes from byte {}, the "
                    "file has {}); "
                    "it is truncated or its header (dim {}, hidden_dim {}, n_layers {}, n_heads "
                    "{}, n_kv_heads {}, vocab_size {}, seq_len {}) is wrong",
                    path, section.name, wanted, offset, file.size(), header.dim, header.hidden_dim,
                    header.n_layers, header.n_heads, header.n_kv_heads, header.vocab_size,
                    header.seq_len);
    offset += bytes;
  }
  TESSERA_REQUIRE(offset == file.size(),
                  "{}: the header implies {} bytes but the file has {}; the header does not "
                  "describe this file",
                  path, offset, file.size());

  // HF name -> (section, layer).
  std::map<std::string, std::pair<const Section*, int64_t>> by_hf_name;
  auto section_named = [&](const std::string& name) -> const Section* {
    for (const Section& section : sections)
      if (section.name == name) return &section;
    return nullptr;
  };
  by_hf_name["model.embed_tokens.weight"] = {section_named("token_embedding_table"), 0};
  by_hf_name["model.norm.weight"] = {section_named("rms_final_weight"), 0};
  if (!config.tie_word_embeddings) by_hf_name["lm_head.weight"] = {section_named("wcls"), 0};
  const std::pair<const char*, const char*> per_layer[] = {
      {"input_layernorm.weight", "rms_att_weight"},
      {"self_attn.q_proj.weight", "wq"},
      {"self_attn.k_proj.weight", "wk"},
      {"self_attn.v_proj.weight", "wv"},
      {"self_attn.o_proj.weight", "wo"},
      {"post_attention_layernorm.weight", "rms_ffn_weight"},
      {"mlp.gate_proj.weight", "w1"},
      {"mlp.down_proj.weight", "w2"},
      {"mlp.up_proj.weight", "w3"}};
  for (int64_t layer = 0; layer < layers; ++layer)
    for (const auto& [hf_name, llama2c_name] : per_layer)
      by_hf_name[fmt::format("model.layers.{}.{}", layer, hf_name)] = {section_named(llama2c_name),
                                                                       layer};

  auto find = [&](const WeightSpec& spec) -> std::optional<FoundTensor> {
    auto it = by_hf_name.find(spec.name);
    if (it == by_hf_name.end()) return std::nullopt;
    const auto& [section, layer] = it->second;
    FoundTensor found;
    found.file = path;
    found.stored_name =
        section->per_layer ? fmt::format("{}[{}]", section->name, layer) : section->name;
    const size_t layer_bytes = static_cast<size_t>(shape_numel(section->shape)) * 4;
    found.stored = StoredTensor{file.data() + section->offset + layer * layer_bytes, DType::f32,
                                section->shape};
    return found;
  };
  weights.tensors = load_expected_weights(config, path, find, options, /*stored_rope_pairs=*/true);
  return weights;
}

}  // namespace tessera::loaders
