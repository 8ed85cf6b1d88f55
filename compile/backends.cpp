#include "compile/backends.h"

#include <map>
#include <memory>

#include "compile/interpreter.h"
#include "runtime/check.h"

namespace tessera {
namespace {

std::map<std::string, CompileBackend>& backend_table() {
  static std::map<std::string, CompileBackend> table = [] {
    std::map<std::string, CompileBackend> built_in;
    built_in["traced"] = [](const Graph& graph, std::span<const Tensor>) -> CompiledCallable {
      auto owned = std::make_shared<const Graph>(graph);
      return [owned](std::span<const Tensor> inputs) { return interpret_graph(*owned, inputs); };
    };
    return built_in;
  }();
  return table;
}

}  // namespace

void register_compile_backend(const std::string& name, CompileBackend backend) {
  TESSERA_REQUIRE(name != "eager" && !backend_table().contains(name),
                  "compile backend '{}' is already registered", name);
  backend_table()[name] = std::move(backend);
}

const CompileBackend& compile_backend(const std::string& name) {
  auto it = backend_table().find(name);
  TESSERA_REQUIRE(it != backend_table().end(), "unknown compile backend '{}'; valid choices: {}",
                  name, fmt::join(compile_backend_names(), ", "));
  return it->second;
}

std::vector<std::string> compile_backend_names() {
  std::vector<std::string> names{"eager"};
  for (const auto& [name, backend] : backend_table()) names.push_back(name);
  return names;
}

}  // namespace tessera
