// NVRTC kernels: generated CUDA source compiled at run time for the device's architecture,
// cached on disk like the CPU kernels (kernel_cache.h: keyed by a hash of source, target, NVRTC
// version and options; written under a temporary name and renamed; entries that fail to load are
// rebuilt), loaded through the CUDA DeviceBackend (kernels/backend.h).
// Compiling needs no GPU: tests compile for sm_90 on machines without one.
#pragma once

#ifdef TESSERA_CUDA

#include <cstdint>
#include <functional>
#include <string>

#include "compile/codegen/cuda_codegen.h"
#include "compile/codegen/kernel_cache.h"
#include "kernels/device.h"

namespace tessera {

class NvrtcKernelCache {
 public:
  // Kernels for `architecture` ("sm_90"), cached under cache_dir/cuda. Loading (load()) also
  // needs the CUDA device index they run on.
  NvrtcKernelCache(std::string cache_dir, std::string architecture, int device_index = -1);
  // A cache for CUDA device `device_index`, compiling for its compute capability.
  static NvrtcKernelCache for_device(std::string cache_dir, int device_index);

  // The compiled image of `source`: a cubin, or PTX when the architecture is newer than NVRTC
  // knows (the runtime then JIT-compiles it). From this process, the cache directory, or NVRTC,
  // whose errors throw an Error naming `name`, the source's path and NVRTC's log.
  std::string image(const std::string& source, const std::string& name);
  // `source`'s tessera_kernel loaded on the device (a cudaKernel_t as const void*, which
  // cudaLaunchKernel takes). Loaded kernels live as long as the process.
  const void* load(const std::string& source, const std::string& name);

  const KernelCacheStats& stats() const { return stats_; }
  const std::string& directory() const { return directory_; }
  // What NVRTC compiles to: "sm_90", or "compute_XY" past NVRTC's newest architecture.
  const std::string& target() const { return target_; }
  // "NVRTC 13.0 -default-device --std=c++17 --include-path=/usr/local/cuda/include"
  static std::string compiler_identity();
  // The cache key of `source` for this target (hex); exposed for tests of the disk entries.
  std::string key(const std::string& source) const;

 private:
  // From the cache directory when the entry is valid and `accept`s it (loads), else NVRTC.
  std::string load_or_compile_image(const std::string& key, const std::string& source,
                                    const std::string& name,
                                    const std::function<bool(const std::string&)>& accept);
  std::string compile(const std::string& key, const std::string& source, const std::string& name);

  std::string directory_;
  std::string target_;
  int device_index_;
  KernelCacheStats stats_;
};

// The CUDA toolkit's include directory holding cuda_fp16.h/cuda_bf16.h, found at run time:
// $CUDA_HOME or $CUDA_PATH, else next to the loaded NVRTC library, else /usr/local/cuda.
std::string cuda_include_dir();

}  // namespace tessera

#endif  // TESSERA_CUDA
