#include "kernels/cuda/gemm/measured_device.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <map>
#include <mutex>

#include "kernels/cuda/gpu_runtime.h"

namespace tessera::gpu {
namespace {

// This module's file, size and modification time: a rebuild changes them.
std::string module_build() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&measured_device), &info) == 0 || info.dli_fname == nullptr)
    return "module unknown";
  struct stat status {};
  if (::stat(info.dli_fname, &status) != 0) return fmt::format("module {}", info.dli_fname);
  return fmt::format(
      "module {} {} bytes {}.{:09}", info.dli_fname, static_cast<long long>(status.st_size),
      static_cast<long long>(status.st_mtim.tv_sec), static_cast<long>(status.st_mtim.tv_nsec));
}

std::string describe(int device) {
  gpuDeviceProp properties;
  GPU_CHECK(gpuGetDeviceProperties(&properties, device));
  int driver = 0, runtime = 0;
  GPU_CHECK(gpuDriverGetVersion(&driver));
  GPU_CHECK(gpuRuntimeGetVersion(&runtime));
  std::string text = fmt::format("{} {} {}.{} {} SMs {} B L2, driver {} runtime {}, {}",
                                 runtime_name(), properties.name, properties.major,
                                 properties.minor, properties.multiProcessorCount,
                                 properties.l2CacheSize, driver, runtime, module_build());
  for (char& c : text)  // one line, as the store keeps it
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return text;
}

}  // namespace

const std::string& measured_device(int device) {
  static std::mutex mutex;
  static std::map<int, std::string> described;
  std::lock_guard lock(mutex);
  auto found = described.find(device);
  if (found == described.end()) found = described.emplace(device, describe(device)).first;
  return found->second;
}

}  // namespace tessera::gpu
