// Hugging Face model folders: config.json (+ generation_config.json) and safetensors weights,
// one file or several listed by model.safetensors.index.json.
#include <spdlog/spdlog.h>
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/architecture_registry.h"
#include "models/fp8_format.h"
#include "models/hf_config_fields.h"
#include "models/json_input.h"
#include "models/loaders/expected_weights.h"
#include "models/loaders/fp8_weights.h"
#include "models/loaders/loaders.h"
#include "models/loaders/safetensors.h"
#include "runtime/check.h"

namespace tessera::loaders {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string architecture_of(const HfConfigFields& fields) {
  if (fields.has("architectures")) {
    const json& list = fields.raw("architectures");
    TESSERA_REQUIRE(list.is_array() && !list.empty() && list[0].is_string(),
                    "{}: 'architectures' must be a non-empty list of names, got {}", fields.file(),
                    json_excerpt(list));
    return list[0].get<std::string>();
  }
  // Older configs name only the model_type.
  const ArchitectureRegistry& registry = ArchitectureRegistry::global();
  const std::string model_type = fields.text("model_type", "");
  const Architecture* architecture = registry.find_by_model_type(model_type);
  TESSERA_REQUIRE(architecture != nullptr,
                  "{}: no 'architectures' and model_type '{}' is not supported; supported "
                  "architectures: {}",
                  fields.file(), model_type, fmt::join(registry.names(), ", "));
  return architecture->name;
}

// transformers >= 5 writes rope_theta and the scaling together as "rope_parameters"; older
// versions write "rope_theta" and "rope_scaling".
const char* rope_key(const HfConfigFields& fields) {
  return fields.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
}

RopeScaling parse_rope_scaling(const HfConfigFields& fields) {
  const char* key = rope_key(fields);
  if (!fields.has(key)) return RopeScaling{};
  return read_rope_scaling(fields.object(key));
}

}  // namespace

ModelConfig read_hf_config(const std::string& folder) {
  const fs::path config_path = fs::path(folder) / "config.json";
  TESSERA_REQUIRE(fs::exists(config_path),
                  "{}: no config.json; a Hugging Face model folder needs config.json and "
                  "*.safetensors",
                  folder);
  const json object = read_json_file(config_path.string(), "model config");
  TESSERA_REQUIRE(object.is_object(), "{}: must hold a JSON object", config_path.string());
  HfConfigFields fields(object, config_path.string());

  ModelConfig config;
  config.architecture = architecture_of(fields);
  const Architecture& architecture =
      ArchitectureRegistry::global().get(config.architecture, fields.file());
  config.vocab_size = fields.integer("vocab_size");
  config.hidden_size = fields.integer("hidden_size");
  config.intermediate_size = fields.integer("intermediate_size");
  config.num_layers = fields.integer("num_hidden_layers");
  config.num_heads = fields.integer("num_attention_heads");
  config.num_kv_heads = fields.integer("num_key_value_heads", config.num_heads);
  TESSERA_REQUIRE(config.num_heads > 0, "{}: num_attention_heads must be positive, got {}",
                  fields.file(), config.num_heads);
  config.head_dim = fields.integer("head_dim", config.hidden_size / config.num_heads);
  config.max_position_embeddings =
      fields.integer("max_position_embeddings", config.max_position_embeddings);
  config.rms_norm_eps = fields.number("rms_norm_eps", config.rms_norm_eps);
  config.rope_theta = fields.number("rope_theta", config.rope_theta);
  if (fields.has("rope_parameters"))
    config.rope_theta = fields.object("rope_parameters").number("rope_theta", config.rope_theta);
  config.rope_scaling = parse_rope_scaling(fields);
  config.tie_word_embeddings = fields.boolean("tie_word_embeddings", false);
  config.hidden_act = fields.text("hidden_act", config.hidden_act);
  config.bos_token_id = fields.integer("bos_token_id", -1);
  config.eos_token_ids = fields.ids("eos_token_id");
  const std::string torch_dtype = fields.text("torch_dtype", fields.text("dtype", "float32"));
  try {
    config.checkpoint_dtype = parse_dtype(torch_dtype);
  } catch (const Error&) {
    config.checkpoint_dtype = DType::f32;  // the weights' own dtype replaces this when loaded
  }
  // Before the architecture's reader, which may allocate per layer (Gemma's layer_types).
  config.check_limits(config_path.string());
  architecture.read_hf_config(fields, config);
  read_quantization_config(fields, config);

  // generation_config.json decides what generation stops on, as in transformers.
  const fs::path generation_path = fs::path(folder) / "generation_config.json";
  if (fs::exists(generation_path)) {
    const json generation = read_json_file(generation_path.string(), "generation config");
    HfConfigFields generation_fields(generation, generation_path.string());
    if (generation_fields.has("eos_token_id"))
      config.eos_token_ids = generation_fields.ids("eos_token_id");
    if (config.bos_token_id < 0)
      config.bos_token_id = generation_fields.integer("bos_token_id", -1);
  }
  config.validate(config_path.string());
  return config;
}

ModelWeights load_hf_folder(const std::string& folder, const LoadOptions& options) {
  ModelWeights weights;
  weights.source = folder;
  weights.config = read_hf_config(folder);

  // Which file holds each tensor: the index when there is one, else every *.safetensors.
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, const SafetensorsFile*> file_of;
  std::string missing_from;
  const fs::path index_path = fs::path(folder) / "model.safetensors.index.json";
  if (fs::exists(index_path)) {
    const json index = read_json_file(index_path.string(), "safetensors index");
    TESSERA_REQUIRE(
        index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
        "{}: must hold a 'weight_map' object of tensor name -> file", index_path.string());
    std::map<std::string, const SafetensorsFile*> by_file_name;
    for (const auto& [name, file_name] : index["weight_map"].items()) {
      TESSERA_REQUIRE(file_name.is_string(), "{}: weight_map['{}'] must be a file name",
                      index_path.string(), name);
      const std::string shard = file_name.get<std::string>();
      // Shards sit in the folder: a path elsewhere (or up) is refused, not followed.
      TESSERA_REQUIRE(!shard.empty() && shard != "." && shard != ".." &&
                          shard.find('/') == std::string::npos &&
                          shard.find('\0') == std::string::npos,
                      "{}: weight_map['{}'] = '{}' is not the name of a file in the folder",
                      index_path.string(), name, shard);
      auto [it, inserted] = by_file_name.emplace(shard, nullptr);
      if (inserted) {
        files.push_back(std::make_unique<SafetensorsFile>((fs::path(folder) / shard).string()));
        it->second = files.back().get();
      }
      file_of[name] = it->second;
    }
    missing_from = index_path.string();
  } else {
    std::vector<fs::path> paths;
    for (const auto& item : fs::directory_iterator(folder))
      if (item.is_regular_file() && item.path().extension() == ".safetensors")
        paths.push_back(item.path());
    std::sort(paths.begin(), paths.end());
    TESSERA_REQUIRE(!paths.empty(),
                    "{}: no *.safetensors files (PyTorch .bin/.pt checkpoints are not supported; "
                    "convert them with safetensors)",
                    folder);
    for (const fs::path& path : paths) {
      files.push_back(std::make_unique<SafetensorsFile>(path.string()));
      for (const auto& [name, entry] : files.back()->entries()) {
        auto [it, inserted] = file_of.emplace(name, files.back().get());
        TESSERA_REQUIRE(inserted, "{}: tensor '{}' is in both {} and {}", folder, name,
                        it->second->path(), path.string());
      }
    }
    missing_from = paths.size() == 1
                       ? paths[0].string()
                       : fmt::format("{} ({} safetensors files)", folder, paths.size());
  }

  auto find = [&](const WeightSpec& spec) -> std::optional<FoundTensor> {
    auto it = file_of.find(spec.name);
    if (it == file_of.end()) return std::nullopt;
    const SafetensorsFile& file = *it->second;
    const SafetensorsEntry* entry = file.find(spec.name);
    TESSERA_REQUIRE(entry != nullptr, "{}: the index puts tensor '{}' in {}, which lacks it",
                    missing_from, spec.name, file.path());
    FoundTensor found;
    found.file = file.path();
    found.stored_name = spec.name;
    if (entry->dtype) {
      found.stored = file.stored(*entry);
    } else {
      found.stored.shape = entry->shape;
      found.stored_dtype_name = entry->dtype_name;
    }
    return found;
  };
  weights.tensors = load_expected_weights(weights.config, missing_from, find, options,
                                          /*stored_rope_pairs=*/false);
  load_fp8_scales(
      weights.config,
      [&](const std::string& name) {
        return find(WeightSpec{name, {}});
      },
      missing_from, options.device, weights.tensors);
  // What the checkpoint holds (not the run dtype), for logs and memory estimates.
  if (const SafetensorsFile* file = file_of.at("model.embed_tokens.weight"))
    weights.config.checkpoint_dtype = *file->find("model.embed_tokens.weight")->dtype;
  return weights;
}

}  // namespace tessera::loaders
