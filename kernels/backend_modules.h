// GPU backends are modules, the ggml way (GGML_BACKEND_DL): libtessera-cuda.so and
// libtessera-hip.so hold a device type's backend, kernels and code generator, and are loaded with
// dlopen the first time something asks for that device type (find_backend, find_kernel, a codegen
// target). A CPU run therefore maps no GPU library. A module registers everything from its static
// initializers as it loads, so loading is all there is to do here.
//
// Modules are looked for in $TESSERA_MODULE_DIR when it is set, else in the directory holding the
// core library (libtessera_kernels.so), where the build puts them.
#pragma once

#include <string>

#include "runtime/device.h"

namespace tessera {

struct BackendModuleStatus {
  bool loaded = false;  // always true for the CPU, which is built in
  std::string path;     // the file looked for; empty for the CPU
  std::string reason;   // why it did not load; empty when it did
};

// Loads the module of `type` on the first call; every call returns that first answer.
const BackendModuleStatus& load_backend_module(DeviceType type);

// "libtessera-cuda.so"
std::string backend_module_file_name(DeviceType type);

}  // namespace tessera
