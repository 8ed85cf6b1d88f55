// `tessera devices`: every device type this build knows, its devices with name and memory, and
// plainly why a GPU type has none (not built in, or built in but no GPU found).
#include <fmt/format.h>

#include <exception>
#include <string>
#include <vector>

#include "engine/cli/command.h"
#include "kernels/backend.h"

namespace tessera::cli {
namespace {

bool built_in(DeviceType type) {
  switch (type) {
    case DeviceType::cpu:
      return true;
    case DeviceType::cuda:
#ifdef TESSERA_CUDA
      return true;
#else
      return false;
#endif
    case DeviceType::hip:
#ifdef TESSERA_HIP
      return true;
#else
      return false;
#endif
  }
  return false;
}

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
  fmt::print("{:<8} {:<40} {}\n", "device", "name", "memory");
  for (DeviceType type : {DeviceType::cpu, DeviceType::cuda, DeviceType::hip}) {
    const char* type_name = device_type_name(type);
    if (!built_in(type)) {
      // Only CUDA has a build option so far; the HIP build is issue 15.
      fmt::print("{:<8} not built in{}\n", type_name,
                 type == DeviceType::cuda
                     ? " (configure with -DTESSERA_CUDA=ON on a machine with nvcc)"
                     : " (HIP builds are not supported yet, issue 15)");
      continue;
    }
    DeviceBackend* backend = find_backend(type);
    int count = backend == nullptr ? 0 : backend->device_count();
    if (count == 0) {
      fmt::print("{:<8} built in, but no GPU found\n", type_name);
      continue;
    }
    for (int index = 0; index < count; ++index) {
      fmt::print("{:<8} {:<40} {}\n", Device{type, index}.str(), backend->device_name(index),
                 memory_text(*backend, index));
    }
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
      "why it has none: not built in, or built in but no GPU found.";
  command.run = run_devices;
  return command;
}

}  // namespace

TESSERA_REGISTER_COMMAND(make_devices_command());

}  // namespace tessera::cli
