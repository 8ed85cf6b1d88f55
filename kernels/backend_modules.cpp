#include "runtime/backend/backend_modules.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "runtime/backend/backend.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// What to do when a module is missing from the build.
const char* build_hint(DeviceType type) {
  return type == DeviceType::hip
             ? "configure with -DTESSERA_HIP=ON where hipcc is installed (Debian: apt-get install "
               "hipcc libamdhip64-dev)"
             : "configure with -DTESSERA_CUDA=ON where the CUDA toolkit (nvcc) is installed";
}

fs::path module_directory() {
  if (const char* configured = std::getenv("TESSERA_MODULE_DIR");
      configured != nullptr && *configured != '\0')
    return configured;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_backend_module), &info) != 0 &&
      info.dli_fname != nullptr)
    return fs::path(info.dli_fname).parent_path();
  return fs::current_path();
}

BackendModuleStatus load(DeviceType type) {
  BackendModuleStatus status;
  status.path = (module_directory() / backend_module_file_name(type)).string();
  // A program linked against the module (some tests and labs are) has it registered already.
  if (registered_backend(type) != nullptr) {
    status.loaded = true;
    return status;
  }
  std::error_code error;
  if (!fs::exists(status.path, error)) {
    status.reason = fmt::format("{} not found: this build has no {} module ({})", status.path,
                                device_type_name(type), build_hint(type));
    return status;
  }
  // Local symbols: two modules define the same names (one source, two vendors).
  void* handle = dlopen(status.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* message = dlerror();
    status.reason = fmt::format("{} did not load: {}", status.path,
                                message != nullptr ? message : "unknown dlopen error");
    return status;
  }
  // Modules stay loaded: their kernels and allocations live as long as the process.
  if (registered_backend(type) == nullptr) {
    status.reason =
        fmt::format("{} loaded but registered no {} backend (a module of another build?)",
                    status.path, device_type_name(type));
    return status;
  }
  status.loaded = true;
  spdlog::debug("loaded the {} module {}", device_type_name(type), status.path);
  return status;
}

}  // namespace

std::string backend_module_file_name(DeviceType type) {
  return fmt::format("libtessera-{}.so", device_type_name(type));
}

const BackendModuleStatus& load_backend_module(DeviceType type) {
  static std::array<std::once_flag, kNumDeviceTypes> once;
  static std::array<BackendModuleStatus, kNumDeviceTypes> statuses;
  const auto slot = static_cast<size_t>(type);
  std::call_once(once[slot], [&] {
    if (type == DeviceType::cpu) {
      statuses[slot].loaded = true;  // built in
    } else {
      statuses[slot] = load(type);
      if (!statuses[slot].loaded) spdlog::debug("{}", statuses[slot].reason);
    }
  });
  return statuses[slot];
}

}  // namespace tessera
