#include "compile/codegen/gpu/gpu_kernel_cache.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "compile/codegen/cache_entry.h"
#include "compile/graph.h"
#include "kernels/cuda/gpu_vendor.h"  // NVRTC names, hipRTC's in the HIP module
#include "runtime/backend/backend.h"
#include "runtime/check.h"

namespace tessera {
namespace fs = std::filesystem;

namespace {

#if defined(TESSERA_GPU_HIP)
constexpr const char* kCompiler = "hipRTC";
#else
constexpr const char* kCompiler = "NVRTC";
#endif

#define RTC_CHECK(call, what)                                                                  \
  do {                                                                                         \
    gpurtcResult rtc_check_result_ = (call);                                                   \
    TESSERA_REQUIRE(rtc_check_result_ == GPURTC_SUCCESS, "{}: {} failed: {}", kCompiler, what, \
                    gpurtcGetErrorString(rtc_check_result_));                                  \
  } while (0)

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

#if defined(TESSERA_GPU_HIP)

// The generated source declares everything it uses (no headers: cuda_codegen.cpp's HIP dialect).
std::vector<std::string> base_options() {
  return {"-std=c++17", "-O3"};
}

// hipRTC takes a processor name with optional features, as the device reports it.
std::string compiler_target(const std::string& architecture) {
  TESSERA_REQUIRE(architecture.rfind("gfx", 0) == 0 && architecture.size() > 3,
                  "AMD GPU architecture '{}' is not a target ID such as gfx90a", architecture);
  return architecture;
}

std::string compiler_version() {
  return fmt::format("{}.{}.{}", HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH);
}

#else

bool has_fp16_headers(const fs::path& dir) {
  std::error_code error;
  return fs::exists(dir / "cuda_fp16.h", error) && fs::exists(dir / "cuda_bf16.h", error);
}

// The CUDA toolkit's include directory holding cuda_fp16.h/cuda_bf16.h, found at run time:
// $CUDA_HOME or $CUDA_PATH, else next to the loaded NVRTC library, else /usr/local/cuda.
std::string cuda_include_dir() {
  static const std::string found = [] {
    std::vector<fs::path> candidates;
    for (const char* variable : {"CUDA_HOME", "CUDA_PATH"})
      if (const char* root = std::getenv(variable); root && *root)
        candidates.push_back(fs::path(root) / "include");
    // The toolkit NVRTC came from: lib64/../include, targets/<arch>/lib/../include, or a pip
    // wheel's nvidia/cuda_nvrtc/lib next to nvidia/cuda_runtime/include.
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&gpurtcVersion), &info) != 0 && info.dli_fname) {
      fs::path lib = fs::path(info.dli_fname).parent_path();
      std::error_code error;
      fs::path resolved = fs::canonical(info.dli_fname, error).parent_path();
      for (const fs::path& dir : {lib, resolved}) {
        candidates.push_back(dir / ".." / "include");
        candidates.push_back(dir / ".." / ".." / "cuda_runtime" / "include");
      }
    }
    candidates.push_back("/usr/local/cuda/include");
    candidates.push_back("/usr/include");
    for (const fs::path& dir : candidates)
      if (has_fp16_headers(dir)) return dir.lexically_normal().string();
    return std::string();
  }();
  TESSERA_REQUIRE(!found.empty(),
                  "cannot find the CUDA headers cuda_fp16.h and cuda_bf16.h that generated "
                  "kernels include (looked in $CUDA_HOME, $CUDA_PATH, next to libnvrtc, "
                  "/usr/local/cuda/include); set CUDA_HOME to the CUDA toolkit");
  return found;
}

std::vector<std::string> base_options() {
  return {"-default-device", "--std=c++17", "--include-path=" + cuda_include_dir()};
}

std::string compiler_version() {
  int major = 0, minor = 0;
  RTC_CHECK(gpurtcVersion(&major, &minor), "reading its version");
  return fmt::format("{}.{}", major, minor);
}

// NVRTC's newest architecture it can emit a cubin for; past it, PTX of that architecture.
std::string compiler_target(const std::string& architecture) {
  int count = 0;
  RTC_CHECK(gpurtcGetNumSupportedArchs(&count), "listing the supported architectures");
  std::vector<int> supported(static_cast<size_t>(count));
  RTC_CHECK(gpurtcGetSupportedArchs(supported.data()), "listing the supported architectures");
  TESSERA_REQUIRE(architecture.rfind("sm_", 0) == 0 && architecture.size() > 3,
                  "CUDA architecture '{}' is not of the form sm_XY (sm_90 for H100)", architecture);
  int wanted = std::atoi(architecture.c_str() + 3);
  if (std::find(supported.begin(), supported.end(), wanted) != supported.end()) return architecture;
  int newest = supported.empty() ? 0 : *std::max_element(supported.begin(), supported.end());
  TESSERA_REQUIRE(newest > 0 && newest < wanted,
                  "NVRTC cannot compile for {} (it supports sm_{} to sm_{}); use a CUDA toolkit "
                  "that supports this GPU",
                  architecture, supported.empty() ? 0 : supported.front(), newest);
  spdlog::info("NVRTC knows no {}: generated kernels are compiled to PTX for compute_{}",
               architecture, newest);
  return fmt::format("compute_{}", newest);
}

#endif

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : " ") + part;
  return text;
}

// A PTX target (compute_XY) gives text; every other target an ELF image.
bool is_ptx_target(const std::string& target) {
  return target.rfind("compute_", 0) == 0;
}

// A cubin or an AMD code object is an ELF file; PTX is text that the loader wants NUL-terminated.
bool valid_image(const std::string& bytes, bool ptx) {
  if (!ptx)
    return bytes.size() > 4 && bytes.compare(0, 4,
                                             "\x7f"
                                             "ELF") == 0;
  return bytes.size() > 1 && bytes.back() == '\0' && bytes.find(".entry") != std::string::npos;
}

std::string program_log(gpurtcProgram program) {
  size_t size = 0;
  if (gpurtcGetProgramLogSize(program, &size) != GPURTC_SUCCESS || size == 0) return "";
  std::string log(size, '\0');
  if (gpurtcGetProgramLog(program, log.data()) != GPURTC_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

std::string GpuKernelCache::compiler_identity() {
  static const std::string identity =
      fmt::format("{} {} {}", kCompiler, compiler_version(), joined(base_options()));
  return identity;
}

GpuKernelCache::GpuKernelCache(std::string cache_dir, std::string architecture, int device_index)
    : directory_(std::move(cache_dir) + "/" + device_type_name(kGpuDeviceType)),
      target_(compiler_target(architecture)),
      device_index_(device_index) {
  std::error_code error;
  fs::create_directories(directory_, error);
  TESSERA_REQUIRE(!error,
                  "cannot create the kernel cache directory {}: {} (set compilation.cache_dir)",
                  directory_, error.message());
  remove_stale_temporaries(directory_);
}

GpuKernelCache GpuKernelCache::for_device(std::string cache_dir, int device_index) {
  std::string architecture =
      backend(Device{kGpuDeviceType, device_index}).architecture(device_index);
  return GpuKernelCache(std::move(cache_dir), architecture, device_index);
}

std::string GpuKernelCache::image_extension() const {
  if (kGpuDeviceType == DeviceType::hip) return ".hsaco";
  return is_ptx_target(target_) ? ".ptx" : ".cubin";
}

std::string GpuKernelCache::key(const std::string& source) const {
  return fmt::format("{:016x}", fnv1a_hash(compiler_identity() + "\n" + target_ + "\n" + source));
}

std::string GpuKernelCache::compile(const std::string& key, const std::string& source,
                                    const std::string& name) {
  // The source goes to disk first, so errors (and the compiler's log lines) name a file to open.
  fs::path source_path =
      fs::path(directory_) / (key + (kGpuDeviceType == DeviceType::hip ? ".hip" : ".cu"));
  write_file_atomically(source_path.string(), source);
  gpurtcProgram program = nullptr;
  RTC_CHECK(gpurtcCreateProgram(&program, source.c_str(), source_path.c_str(), 0, nullptr, nullptr),
            "creating a program");
  std::unique_ptr<gpurtcProgram, void (*)(gpurtcProgram*)> destroy(
      &program, [](gpurtcProgram* p) { (void)gpurtcDestroyProgram(p); });
  std::vector<std::string> options = base_options();
#if defined(TESSERA_GPU_HIP)
  options.push_back("--offload-arch=" + target_);
#else
  options.push_back("--gpu-architecture=" + target_);
#endif
  std::vector<const char*> option_pointers;
  for (const std::string& option : options) option_pointers.push_back(option.c_str());
  auto start = std::chrono::steady_clock::now();
  gpurtcResult result = gpurtcCompileProgram(program, static_cast<int>(option_pointers.size()),
                                             option_pointers.data());
  double milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (result != GPURTC_SUCCESS) {
    throw Error(
        fmt::format("compiling {} kernel {} failed: {} reported {}\nsource: {}\n"
                    "options: {}\n{}",
                    device_type_name(kGpuDeviceType), name, kCompiler, gpurtcGetErrorString(result),
                    source_path.string(), joined(options), program_log(program)));
  }
  std::string image;
  size_t size = 0;
#if !defined(TESSERA_GPU_HIP)
  if (is_ptx_target(target_)) {
    RTC_CHECK(gpurtcGetPTXSize(program, &size), "reading the PTX's size");  // with its NUL
    image.resize(size);
    RTC_CHECK(gpurtcGetPTX(program, image.data()), "reading the PTX");
  } else
#endif
  {
    RTC_CHECK(gpurtcGetCodeSize(program, &size), "reading the image's size");
    image.resize(size);
    RTC_CHECK(gpurtcGetCode(program, image.data()), "reading the image");
  }
  spdlog::debug("{} compiled {} for {} in {:.0f} ms ({})", kCompiler, name, target_, milliseconds,
                source_path.string());
  write_cache_entry((fs::path(directory_) / (key + image_extension())).string(), image);
  ++stats_.compiled;
  return image;
}

std::string GpuKernelCache::load_or_compile_image(
    const std::string& key, const std::string& source, const std::string& name,
    const std::function<bool(const std::string&)>& accept) {
  fs::path path = fs::path(directory_) / (key + image_extension());
  if (fs::exists(path)) {
    const std::optional<std::string> bytes = read_cache_entry(path.string());
    if (bytes && valid_image(*bytes, is_ptx_target(target_)) && accept(*bytes)) {
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
const void* load_kernel(const std::string& image, int device_index, std::string* error) {
  try {
    return backend(Device{kGpuDeviceType, device_index})
        .load_kernel_image(device_index, image, "tessera_kernel");
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
      function = load_kernel(bytes, device_index_, &error);
      return function != nullptr;
    });
  } else {
    ++stats_.memory_hits;
  }
  if (function == nullptr) function = load_kernel(entry.image, device_index_, &error);
  TESSERA_REQUIRE(function != nullptr, "compiled kernel {} ({} in {}) does not load on {}: {}",
                  name, cache_key, directory_, Device{kGpuDeviceType, device_index_}.str(), error);
  entry.functions.emplace_back(device_index_, function);
  return function;
}

}  // namespace tessera
