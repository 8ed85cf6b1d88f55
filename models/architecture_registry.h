// Model families by Hugging Face `architectures` name. Each family file (models/llama.cpp,
// models/gemma.cpp) registers its architectures with what a loader and the engine need of it:
// the config.json fields of its own, the weights it expects, and a factory. Loaders and the engine
// look architectures up here; nothing else lists them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace tessera {

class HfConfigFields;  // models/hf_config_fields.h

struct Architecture {
  std::string name;        // HF architectures[0]: "LlamaForCausalLM"
  std::string model_type;  // config.json's model_type, for configs without `architectures`
  // Reads the family's own config.json fields into `config` (the common ones are read already)
  // and refuses features the family does not implement, naming the field.
  std::function<void(const HfConfigFields&, ModelConfig&)> read_hf_config;
  // Every tensor of a model of `config`, in load order.
  std::function<std::vector<WeightSpec>(const ModelConfig&)> expected_weights;
  // Builds the model from its weights (moved in), serving `max_positions` positions.
  std::function<std::unique_ptr<CausalLM>(ModelWeights, int64_t)> create;
  // Whether the family's model code shards over tensor-parallel ranks (models/tensor_parallel.h).
  bool tensor_parallel = false;
};

class ArchitectureRegistry {
 public:
  static ArchitectureRegistry& global();
  bool add(Architecture architecture);
  const Architecture* find(const std::string& name) const;
  const Architecture* find_by_model_type(const std::string& model_type) const;
  // Throws naming `where` and the unknown name, and listing the registered names.
  const Architecture& get(const std::string& name, const std::string& where) const;
  std::vector<std::string> names() const;  // sorted

 private:
  std::map<std::string, Architecture> by_name_;
};

// The registered architecture of weights.config builds the model.
std::unique_ptr<CausalLM> create_model(ModelWeights weights, int64_t max_positions);
// The tensors a model of `config` expects (its architecture's list).
std::vector<WeightSpec> expected_weights(const ModelConfig& config);

}  // namespace tessera

#define TESSERA_ARCHITECTURE_CONCAT_INNER(a, b) a##b
#define TESSERA_ARCHITECTURE_CONCAT(a, b) TESSERA_ARCHITECTURE_CONCAT_INNER(a, b)
// Registers an architecture at load time: TESSERA_REGISTER_ARCHITECTURE(gemma2_architecture());
#define TESSERA_REGISTER_ARCHITECTURE(architecture)                                        \
  [[maybe_unused]] static const bool TESSERA_ARCHITECTURE_CONCAT(architecture_registered_, \
                                                                 __COUNTER__) =            \
      ::tessera::ArchitectureRegistry::global().add(architecture)
