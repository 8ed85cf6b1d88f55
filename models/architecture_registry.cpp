#include "models/architecture_registry.h"

#include "runtime/check.h"

namespace tessera {

ArchitectureRegistry& ArchitectureRegistry::global() {
  static ArchitectureRegistry registry;
  return registry;
}

bool ArchitectureRegistry::add(Architecture architecture) {
  TESSERA_CHECK(architecture.read_hf_config && architecture.expected_weights && architecture.create,
                "architecture {} registered without its config reader, weights or factory",
                architecture.name);
  const std::string name = architecture.name;
  TESSERA_CHECK(by_name_.emplace(name, std::move(architecture)).second,
                "architecture {} registered twice", name);
  return true;
}

const Architecture* ArchitectureRegistry::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

const Architecture* ArchitectureRegistry::find_by_model_type(const std::string& model_type) const {
  for (const auto& [name, architecture] : by_name_)
    if (architecture.model_type == model_type) return &architecture;
  return nullptr;
}

const Architecture& ArchitectureRegistry::get(const std::string& name,
                                              const std::string& where) const {
  const Architecture* architecture = find(name);
  TESSERA_REQUIRE(architecture != nullptr, "{}: architecture '{}' is not supported; supported: {}",
                  where, name, fmt::join(names(), ", "));
  return *architecture;
}

std::vector<std::string> ArchitectureRegistry::names() const {
  std::vector<std::string> names;
  for (const auto& [name, architecture] : by_name_) names.push_back(name);
  return names;
}

std::unique_ptr<CausalLM> create_model(ModelWeights weights, int64_t max_positions) {
  const Architecture& architecture =
      ArchitectureRegistry::global().get(weights.config.architecture, weights.source);
  return architecture.create(std::move(weights), max_positions);
}

std::vector<WeightSpec> expected_weights(const ModelConfig& config) {
  return ArchitectureRegistry::global()
      .get(config.architecture, "model config")
      .expected_weights(config);
}

}  // namespace tessera
