// A device type's compiler of generated kernel source at run time: NVRTC in the CUDA module,
// hipRTC in the HIP module (kernels/cuda/backend/runtime_compiler.cpp, one source for both). The
// module only turns source into an image; what to compile, the cache keys and the on-disk entries
// belong to compile/codegen (gpu_kernel_cache.h), so no module builds compile/'s sources.
#pragma once

#include <string>

namespace tessera {

class RuntimeCompiler {
 public:
  virtual ~RuntimeCompiler() = default;
  // The compiler, its version and its fixed options ("NVRTC 13.0 -default-device --std=c++17
  // --include-path=/usr/local/cuda/include"): part of every cache key.
  virtual std::string identity() const = 0;
  // What it compiles for on a device of `architecture` (DeviceBackend::architecture): "sm_90", a
  // PTX target "compute_XY" past the compiler's newest architecture, or an AMD target ID. Throws
  // naming an architecture that is not of the device type's form or that it cannot compile for.
  virtual std::string target(const std::string& architecture) const = 0;
  // The source file's extension (".cu", ".hip") and the image's for `target` (".cubin", ".ptx",
  // ".hsaco").
  virtual std::string source_extension() const = 0;
  virtual std::string image_extension(const std::string& target) const = 0;
  // Whether `bytes` are a whole image of `target`'s kind (what a cache entry must hold).
  virtual bool valid_image(const std::string& bytes, const std::string& target) const = 0;
  // `source`'s image for `target`; throws an Error naming `name`, `source_path` (where the caller
  // saved the source), the options and the compiler's log when it does not compile.
  virtual std::string compile(const std::string& source, const std::string& source_path,
                              const std::string& target, const std::string& name) const = 0;
};

}  // namespace tessera
