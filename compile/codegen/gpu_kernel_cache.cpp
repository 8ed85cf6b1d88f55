#include "compile/codegen/gpu_kernel_cache.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "compile/codegen/cache_entry.h"
#include "compile/ir/graph.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/backend_modules.h"
#include "runtime/check.h"

namespace tessera {
namespace fs = std::filesystem;

namespace {

// Compiled images and loaded kernels by cache key, shared by every cache in the process; never
// unloaded, since compiled plans hold their kernels for the process's lifetime.
// A loaded kernel per device index: a HIP module loads into one device only, so tensor-parallel
// ranks on other devices load the image again. (A short list, not a map: hipcc 5.2's clang crashes
// instantiating a map of maps.)
struct ProcessEntry {
  std::string image;
  std::vector<std::pair<int, const void*>> functions;  // (device index, kernel)
  const void* function(int device) const {
    for (const auto& [index, kernel] : functions)
      if (index == device) return kernel;
    return nullptr;
  }
};
std::map<std::string, ProcessEntry>& process_entries() {
  static std::map<std::string, ProcessEntry> entries;
  return entries;
}
std::mutex& process_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The compiler of `type`'s module, loading the module on first use; an error naming the type when
// it is missing.
const RuntimeCompiler& compiler_for(DeviceType type) {
  DeviceBackend* device_backend = find_backend(type);
  if (device_backend == nullptr)
    throw Error(fmt::format("cannot compile generated kernels for {}: {}", device_type_name(type),
                            load_backend_module(type).reason));
  const RuntimeCompiler* compiler = device_backend->runtime_compiler();
  TESSERA_REQUIRE(compiler != nullptr, "devices of type {} have no run-time kernel compiler",
                  device_type_name(type));
  return *compiler;
}

}  // namespace

GpuKernelCache::GpuKernelCache(std::string cache_dir, DeviceType type,
                               const std::string& architecture, int device_index)
    : type_(type),
      compiler_(&compiler_for(type)),
      directory_(prepare_cache_directory(std::move(cache_dir) + "/" + device_type_name(type))),
      target_(compiler_->target(architecture)),
      device_index_(device_index) {}

GpuKernelCache GpuKernelCache::for_device(std::string cache_dir, Device device) {
  return GpuKernelCache(std::move(cache_dir), device.type,
                        backend(device).architecture(device.index), device.index);
}

std::string GpuKernelCache::key(const std::string& source) const {
  return fmt::format("{:016x}", fnv1a_hash(compiler_identity() + "\n" + target_ + "\n" + source));
}

std::string GpuKernelCache::compile(const std::string& key, const std::string& source,
                                    const std::string& name) {
  // The source goes to disk first, so errors (and the compiler's log lines) name a file to open.
  fs::path source_path = fs::path(directory_) / (key + compiler_->source_extension());
  write_file_atomically(source_path.string(), source);
  std::string image = compiler_->compile(source, source_path.string(), target_, name);
  write_cache_entry((fs::path(directory_) / (key + compiler_->image_extension(target_))).string(),
                    image);
  ++stats_.compiled;
  return image;
}

std::string GpuKernelCache::load_or_compile_image(
    const std::string& key, const std::string& source, const std::string& name,
    const std::function<bool(const std::string&)>& accept) {
  fs::path path = fs::path(directory_) / (key + compiler_->image_extension(target_));
  if (fs::exists(path)) {
    const std::optional<std::string> bytes = read_cache_entry(path.string());
    if (bytes && compiler_->valid_image(*bytes, target_) && accept(*bytes)) {
      ++stats_.disk_hits;
      return *bytes;
    }
    spdlog::warn("kernel cache entry {} is {}; rebuilding it", path.string(),
                 bytes ? fmt::format("not a loadable image ({} bytes)", bytes->size())
                       : std::string("not a whole entry"));
    ++stats_.rebuilt;
  }
  return compile(key, source, name);
}

std::string GpuKernelCache::image(const std::string& source, const std::string& name) {
  std::string cache_key = key(source);
  std::lock_guard lock(process_mutex());
  ProcessEntry& entry = process_entries()[cache_key];
  if (!entry.image.empty()) {
    ++stats_.memory_hits;
    return entry.image;
  }
  entry.image =
      load_or_compile_image(cache_key, source, name, [](const std::string&) { return true; });
  return entry.image;
}

namespace {

// The image's tessera_kernel loaded through the module's backend; nullptr (and `error` set) when
// it does not load.
const void* load_kernel(const std::string& image, Device device, std::string* error) {
  try {
    return backend(device).load_kernel_image(device.index, image, "tessera_kernel");
  } catch (const Error& failure) {
    *error = failure.what();
    return nullptr;
  }
}

}  // namespace

const void* GpuKernelCache::load(const std::string& source, const std::string& name) {
  TESSERA_CHECK(device_index_ >= 0, "GpuKernelCache::load for {} without a device", name);
  std::string cache_key = key(source);
  std::lock_guard lock(process_mutex());
  ProcessEntry& entry = process_entries()[cache_key];
  if (const void* loaded = entry.function(device_index_)) {
    ++stats_.memory_hits;
    return loaded;
  }
  const void* function = nullptr;
  std::string error;
  if (entry.image.empty()) {
    // A disk entry counts only when it loads; one that does not is rebuilt.
    entry.image = load_or_compile_image(cache_key, source, name, [&](const std::string& bytes) {
      function = load_kernel(bytes, Device{type_, device_index_}, &error);
      return function != nullptr;
    });
  } else {
    ++stats_.memory_hits;
  }
  if (function == nullptr)
    function = load_kernel(entry.image, Device{type_, device_index_}, &error);
  TESSERA_REQUIRE(function != nullptr, "compiled kernel {} ({} in {}) does not load on {}: {}",
                  name, cache_key, directory_, Device{type_, device_index_}.str(), error);
  entry.functions.emplace_back(device_index_, function);
  return function;
}

}  // namespace tessera
