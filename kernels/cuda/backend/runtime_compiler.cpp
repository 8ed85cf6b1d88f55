// The module's RuntimeCompiler (runtime/backend/runtime_compiler.h): NVRTC in the CUDA module,
// hipRTC in the HIP module, through gpu_vendor.h's gpurtc names. Source in, image out; the cache
// around it is compile/codegen/gpu_kernel_cache.h.
#include "kernels/cuda/backend/runtime_compiler.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "kernels/cuda/gpu_vendor.h"
#include "runtime/check.h"

namespace tessera::gpu {
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

std::string program_log(gpurtcProgram program) {
  size_t size = 0;
  if (gpurtcGetProgramLogSize(program, &size) != GPURTC_SUCCESS || size == 0) return "";
  std::string log(size, '\0');
  if (gpurtcGetProgramLog(program, log.data()) != GPURTC_SUCCESS) return "";
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

class GpuRuntimeCompiler final : public RuntimeCompiler {
 public:
  std::string identity() const override {
    static const std::string identity =
        fmt::format("{} {} {}", kCompiler, compiler_version(), joined(base_options()));
    return identity;
  }
  std::string target(const std::string& architecture) const override {
    return compiler_target(architecture);
  }
  std::string source_extension() const override {
    return kGpuDeviceType == DeviceType::hip ? ".hip" : ".cu";
  }
  std::string image_extension(const std::string& target) const override {
    if (kGpuDeviceType == DeviceType::hip) return ".hsaco";
    return is_ptx_target(target) ? ".ptx" : ".cubin";
  }
  // A cubin or an AMD code object is an ELF file; PTX is text that the loader wants
  // NUL-terminated.
  bool valid_image(const std::string& bytes, const std::string& target) const override {
    if (!is_ptx_target(target))
      return bytes.size() > 4 && bytes.compare(0, 4,
                                               "\x7f"
                                               "ELF") == 0;
    return bytes.size() > 1 && bytes.back() == '\0' && bytes.find(".entry") != std::string::npos;
  }
  std::string compile(const std::string& source, const std::string& source_path,
                      const std::string& target, const std::string& name) const override;
};

std::string GpuRuntimeCompiler::compile(const std::string& source, const std::string& source_path,
                                        const std::string& target, const std::string& name) const {
  gpurtcProgram program = nullptr;
  RTC_CHECK(gpurtcCreateProgram(&program, source.c_str(), source_path.c_str(), 0, nullptr, nullptr),
            "creating a program");
  std::unique_ptr<gpurtcProgram, void (*)(gpurtcProgram*)> destroy(
      &program, [](gpurtcProgram* p) { (void)gpurtcDestroyProgram(p); });
  std::vector<std::string> options = base_options();
#if defined(TESSERA_GPU_HIP)
  options.push_back("--offload-arch=" + target);
#else
  options.push_back("--gpu-architecture=" + target);
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
                    source_path, joined(options), program_log(program)));
  }
  std::string image;
  size_t size = 0;
#if !defined(TESSERA_GPU_HIP)
  if (is_ptx_target(target)) {
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
  spdlog::debug("{} compiled {} for {} in {:.0f} ms ({})", kCompiler, name, target, milliseconds,
                source_path);
  return image;
}

}  // namespace

const RuntimeCompiler& module_runtime_compiler() {
  static const GpuRuntimeCompiler compiler;
  return compiler;
}

}  // namespace tessera::gpu
