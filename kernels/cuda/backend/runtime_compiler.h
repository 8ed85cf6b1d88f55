// The module's compiler of generated kernels (NVRTC or hipRTC), which its DeviceBackend hands out
// (DeviceBackend::runtime_compiler).
#pragma once

#include "runtime/backend/runtime_compiler.h"

namespace tessera::gpu {

const RuntimeCompiler& module_runtime_compiler();

}  // namespace tessera::gpu
