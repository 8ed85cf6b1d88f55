// Code generation targets, one per device type (tinygrad's renderer/compiler/program triple): a
// target renders a fused row kernel's body as source for its device, compiles it (through an
// on-disk cache) and loads it, and launches what it loaded on a stream. C++ built by the system
// compiler for the CPU (cpu_codegen_target.cpp), NVRTC for CUDA and hipRTC for HIP
// (gpu/gpu_codegen_target.cpp, built into each GPU module, which registers it as it loads); a new
// target is one file that registers itself with TESSERA_REGISTER_CODEGEN_TARGET. Launches reach
// the device only through its DeviceBackend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "compile/codegen/kernel_cache.h"
#include "compile/codegen/row_kernel.h"
#include "runtime/backend/backend.h"

namespace tessera {

// A generated kernel loaded for one device, launchable over a number of rows.
class LoadedKernel {
 public:
  virtual ~LoadedKernel() = default;
  // Runs rows [0, rows) on `stream`; `buffers` holds the kernel's inputs, then its outputs (device
  // pointers), num_buffers() of them.
  virtual void launch(int64_t rows, void* const* buffers, Stream& stream) const = 0;
  virtual size_t num_buffers() const = 0;
};

class CodegenTarget {
 public:
  virtual ~CodegenTarget() = default;
  // "cpp", "cu": the extension of dumped sources.
  virtual std::string source_extension() const = 0;
  virtual std::string render(const RowKernelBody& body, const std::string& name) const = 0;
  // Compiles `source` (or takes it from the cache) and loads it on the target's device.
  virtual std::shared_ptr<const LoadedKernel> load(const std::string& source,
                                                   const std::string& name,
                                                   const RowKernelBody& body) = 0;
  virtual const KernelCacheStats& stats() const = 0;
  virtual std::string cache_directory() const = 0;
};

// Makes the target for `device`, caching compiled kernels under `cache_dir` (resolved already).
using CodegenTargetFactory =
    std::function<std::unique_ptr<CodegenTarget>(Device device, const std::string& cache_dir)>;

bool register_codegen_target(DeviceType type, CodegenTargetFactory factory);
// Whether generated kernels can run on `device`'s type.
bool has_codegen_target(DeviceType type);
// The target for `device`; throws naming the device when its type has none.
std::unique_ptr<CodegenTarget> make_codegen_target(Device device, const std::string& cache_dir);

}  // namespace tessera

#define TESSERA_CODEGEN_CONCAT_INNER(a, b) a##b
#define TESSERA_CODEGEN_CONCAT(a, b) TESSERA_CODEGEN_CONCAT_INNER(a, b)
// Registers a target at load time: TESSERA_REGISTER_CODEGEN_TARGET(DeviceType::cpu, factory);
#define TESSERA_REGISTER_CODEGEN_TARGET(type, factory)                                      \
  [[maybe_unused]] static const bool TESSERA_CODEGEN_CONCAT(codegen_target_, __COUNTER__) = \
      ::tessera::register_codegen_target(type, factory)
