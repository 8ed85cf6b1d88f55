// Generated GPU kernels compiled at run time for the device's architecture, by NVRTC in the CUDA
// module and by hipRTC in the HIP module (this folder is built into the GPU modules only, from
// one source through kernels/cuda/gpu_vendor.h). Cached on disk like the CPU kernels
// (kernel_cache.h: keyed by a hash of source, target, compiler version and options; entries in
// cache_entry.h's form, so a killed writer never leaves one that is read half-written; entries
// that fail the check or to load are rebuilt), loaded through the module's DeviceBackend
// (runtime/backend/backend.h). Compiling needs no GPU: tests compile for sm_90 and
// gfx90a on machines without one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "compile/codegen/kernel_cache.h"

namespace tessera {

class GpuKernelCache {
 public:
  // Kernels for `architecture` ("sm_90" on CUDA, "gfx90a" or a target ID such as
  // "gfx90a:sramecc+:xnack-" on HIP), cached under cache_dir/cuda or cache_dir/hip. Loading
  // (load()) also needs the index of the device they run on.
  GpuKernelCache(std::string cache_dir, std::string architecture, int device_index = -1);
  // A cache for device `device_index` of the module's type, compiling for its architecture.
  static GpuKernelCache for_device(std::string cache_dir, int device_index);

  // The compiled image of `source`: a cubin (PTX when the architecture is newer than NVRTC
  // knows: the runtime then JIT-compiles it) or an AMD code object. From this process, the cache
  // directory, or the compiler, whose errors throw an Error naming `name`, the source's path and
  // the compiler's log.
  std::string image(const std::string& source, const std::string& name);
  // `source`'s tessera_kernel loaded on the device (what DeviceBackend::launch_kernel takes).
  // Loaded kernels live as long as the process.
  const void* load(const std::string& source, const std::string& name);

  const KernelCacheStats& stats() const { return stats_; }
  const std::string& directory() const { return directory_; }
  // What the compiler compiles for: "sm_90", "compute_XY" past NVRTC's newest architecture, or
  // the AMD target ID.
  const std::string& target() const { return target_; }
  // "NVRTC 13.0 -default-device --std=c++17 --include-path=/usr/local/cuda/include",
  // "hipRTC 5.2.21153 -std=c++17 -O3"
  static std::string compiler_identity();
  // The cache key of `source` for this target (hex); exposed for tests of the disk entries.
  std::string key(const std::string& source) const;

 private:
  // From the cache directory when the entry is valid and `accept`s it (loads), else compiled.
  std::string load_or_compile_image(const std::string& key, const std::string& source,
                                    const std::string& name,
                                    const std::function<bool(const std::string&)>& accept);
  std::string compile(const std::string& key, const std::string& source, const std::string& name);
  // ".cubin", ".ptx" or ".hsaco": the image file's extension for this target.
  std::string image_extension() const;

  std::string directory_;
  std::string target_;
  int device_index_;
  KernelCacheStats stats_;
};

}  // namespace tessera
