// `tessera devices`: every device type, its devices with name and memory, and plainly why a GPU
// type has none (no GPU found, or its module is missing or did not load: the module table says
// which file was looked for and why it did not load).
#include <fmt/format.h>

#include <exception>
#include <string>
#include <vector>

#include "engine/cli/command.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/backend_modules.h"

namespace tessera::cli {
namespace {

std::string gib(size_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string memory_text(const DeviceBackend& backend, int index) {
  try {
    auto [total, free] = backend.memory_info(index);
    return fmt::format("{} total, {} free", gib(total), gib(free));
  } catch (const std::exception& error) {
    return fmt::format("memory unknown ({})", error.what());
  }
}

int run_devices(const std::vector<std::string>& args) {
  expect_no_arguments("devices", args);
  constexpr DeviceType kTypes[] = {DeviceType::cpu, DeviceType::cuda, DeviceType::hip};
  fmt::print("{:<8} {:<40} {}\n", "device", "name", "memory");
  for (DeviceType type : kTypes) {
    const char* type_name = device_type_name(type);
    DeviceBackend* backend = find_backend(type);  // loads the type's module
    if (backend == nullptr) {
      fmt::print("{:<8} no {} module (below)\n", type_name, type_name);
      continue;
    }
    int count = backend->device_count();
    if (count == 0) {
      fmt::print("{:<8} no GPU found\n", type_name);
      continue;
    }
    for (int index = 0; index < count; ++index) {
      fmt::print("{:<8} {:<40} {}\n", Device{type, index}.str(), backend->device_name(index),
                 memory_text(*backend, index));
    }
  }
  fmt::print("\n{:<8} {}\n", "module", "state");
  for (DeviceType type : kTypes) {
    if (type == DeviceType::cpu) continue;  // built in
    const BackendModuleStatus& module = load_backend_module(type);
    fmt::print("{:<8} {}\n", device_type_name(type),
               module.loaded ? fmt::format("loaded from {}", module.path)
                             : fmt::format("not loaded: {}", module.reason));
  }
  return 0;
}

Command make_devices_command() {
  Command command;
  command.name = "devices";
  command.summary = "list the devices this build can run on, with their memory";
  command.usage =
      "usage: tessera devices\n"
      "\n"
      "Lists each device type (cpu, cuda, hip): its devices with name, total and free memory, or\n"
      "why it has none: no GPU found, or no module. Then each GPU module (libtessera-cuda.so,\n"
      "libtessera-hip.so, loaded on first use): the file it was loaded from, or why it did not\n"
      "load. Modules are looked for next to libtessera_kernels.so, or in $TESSERA_MODULE_DIR.";
  command.run = run_devices;
  return command;
}

}  // namespace

TESSERA_REGISTER_COMMAND(make_devices_command());

}  // namespace tessera::cli
