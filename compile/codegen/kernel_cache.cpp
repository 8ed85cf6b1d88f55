#include "compile/codegen/kernel_cache.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "compile/codegen/cache_entry.h"
#include "compile/ir/graph.h"
#include "runtime/check.h"

namespace tessera {
namespace fs = std::filesystem;

namespace {

const char* compiler() {
  const char* from_env = std::getenv("CXX");
  return from_env && *from_env ? from_env : "c++";
}

constexpr const char* kFlags = "-O3 -march=native -fPIC -shared -std=c++17 -w";

// Runs a shell command; returns its exit status and what it printed.
int run_command(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  TESSERA_REQUIRE(pipe != nullptr, "could not run '{}'", command);
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) output->append(buffer.data(), n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Loaded objects by cache key, shared by every cache in the process; never unloaded, since
// compiled plans hold their function pointers for the process's lifetime.
std::map<std::string, void*>& loaded_kernels() {
  static std::map<std::string, void*> loaded;
  return loaded;
}
std::mutex& loaded_mutex() {
  static std::mutex mutex;
  return mutex;
}

void* open_kernel(const fs::path& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  return dlsym(handle, "tessera_kernel");
}

}  // namespace

std::string resolve_cache_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/tessera";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/tessera";
  return (fs::temp_directory_path() / "tessera-cache").string();
}

std::string CpuKernelCache::compiler_identity() {
  static const std::string identity = [] {
    std::string version;
    run_command(fmt::format("{} --version", compiler()), &version);
    version = version.substr(0, version.find('\n'));
    return fmt::format("{} {}", version, kFlags);
  }();
  return identity;
}

CpuKernelCache::CpuKernelCache(std::string cache_dir)
    : directory_(prepare_cache_directory(std::move(cache_dir) + "/cpu")) {}

void* CpuKernelCache::load(const std::string& source, const std::string& name) {
  std::string key = fmt::format("{:016x}", fnv1a_hash(compiler_identity() + "\n" + source));
  std::lock_guard lock(loaded_mutex());
  if (auto it = loaded_kernels().find(key); it != loaded_kernels().end()) {
    ++stats_.memory_hits;
    return it->second;
  }
  fs::path library = fs::path(directory_) / (key + ".so");
  fs::path source_path = fs::path(directory_) / (key + ".cpp");
  if (fs::exists(library)) {
    // Checked whole (cache_entry.h) before dlopen sees it: a cut-off shared object could crash
    // the loader rather than fail.
    const bool whole = is_whole_cache_entry(library.string());
    if (void* function = whole ? open_kernel(library) : nullptr) {
      ++stats_.disk_hits;
      loaded_kernels()[key] = function;
      return function;
    }
    spdlog::warn(
        "kernel cache entry {} {}; rebuilding it", library.string(),
        whole ? fmt::format("does not load ({})", dlerror()) : std::string("is not a whole entry"));
    ++stats_.rebuilt;
  }
  write_file_atomically(source_path.string(), source);
  const std::string temporary = create_temporary_entry(library.string());
  std::string command =
      fmt::format("{} {} -o '{}' '{}'", compiler(), kFlags, temporary, source_path.string());
  std::string output;
  if (run_command(command, &output) != 0) {
    fs::remove(temporary);
    throw Error(fmt::format("compiling kernel {} failed: {}\nsource: {}\ncommand: {}\n{}", name,
                            "the C++ compiler reported errors", source_path.string(), command,
                            output));
  }
  seal_cache_entry(temporary, library.string());
  ++stats_.compiled;
  void* function = open_kernel(library);
  TESSERA_REQUIRE(function != nullptr, "compiled kernel {} ({}) does not load: {}", name,
                  library.string(), dlerror());
  loaded_kernels()[key] = function;
  return function;
}

}  // namespace tessera
