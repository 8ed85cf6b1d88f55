#include "runtime/kernel_registry.h"

#include <map>
#include <utility>

#include "runtime/backend/backend_modules.h"
#include "runtime/check.h"

namespace tessera {

namespace {

std::map<std::pair<std::string, DeviceType>, KernelFn>& kernel_table() {
  static std::map<std::pair<std::string, DeviceType>, KernelFn> table;
  return table;
}

}  // namespace

bool register_kernel(const std::string& op, DeviceType device, KernelFn kernel) {
  auto [it, inserted] = kernel_table().emplace(std::make_pair(op, device), kernel);
  TESSERA_CHECK(inserted, "kernel for op '{}' on {} registered twice", op,
                device_type_name(device));
  return true;
}

KernelFn find_kernel(const std::string& op, DeviceType device) {
  load_backend_module(device);  // a GPU type's kernels register as its module loads
  auto it = kernel_table().find({op, device});
  return it == kernel_table().end() ? nullptr : it->second;
}

void run_kernel(const std::string& op, DeviceType device, const KernelArgs& args) {
  KernelFn kernel = find_kernel(op, device);
  TESSERA_REQUIRE(kernel != nullptr, "op '{}' has no kernel for device type {}", op,
                  device_type_name(device));
  kernel(args);
}

}  // namespace tessera
