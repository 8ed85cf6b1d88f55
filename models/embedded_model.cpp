#include "models/embedded_model.h"

#include <dlfcn.h>

#include <filesystem>
#include <vector>

#include "runtime/check.h"

namespace tessera {
namespace fs = std::filesystem;

namespace {

// Where embedded models are, relative to this library: the build copies models/embedded/ next to
// it, and an install puts the library in lib/ and the models in share/tessera/models/.
std::vector<fs::path> embedded_model_folders() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&resolve_model_path), &info) == 0 || info.dli_fname == nullptr)
    return {};
  const fs::path library_folder = fs::path(info.dli_fname).parent_path();
  return {library_folder / "models", library_folder / ".." / "share" / "tessera" / "models"};
}

}  // namespace

std::string resolve_model_path(const std::string& model) {
  if (!model.starts_with(kEmbeddedModelPrefix)) return model;
  const std::string name = model.substr(kEmbeddedModelPrefix.size());
  TESSERA_REQUIRE(
      !name.empty() && name.find('/') == std::string::npos && name.find("..") == std::string::npos,
      "{}: an embedded model is named embedded:NAME (embedded:stories260K)", model);
  std::string looked_in;
  for (const fs::path& folder : embedded_model_folders()) {
    const fs::path file = folder / (name + ".gguf");
    std::error_code error;
    if (fs::is_regular_file(file, error)) return file.lexically_normal().string();
    looked_in += (looked_in.empty() ? "" : ", ") + folder.lexically_normal().string();
  }
  throw Error(fmt::format(
      "{}: no {}.gguf in {} (the build copies models/embedded/ there; rebuild, or pass "
      "--model PATH)",
      model, name,
      looked_in.empty() ? "any folder (the library's location is unknown)" : looked_in));
}

}  // namespace tessera
