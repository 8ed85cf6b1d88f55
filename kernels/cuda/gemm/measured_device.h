// What a measured choice of this module (kernels/measured_choices.h) is valid for: the GPU (name,
// compute capability, SMs, L2), the driver and runtime versions, and this module's build (its
// file's path, size and modification time), so that a rebuilt kernel or another GPU measures again.
#pragma once

#include <string>

namespace tessera::gpu {

// One line of text describing device `device` as above; computed once per device.
const std::string& measured_device(int device);

}  // namespace tessera::gpu
