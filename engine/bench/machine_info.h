// What a benchmark report says about where it ran: the host, the device and the source commit,
// so that figures from different runs are never compared unknowingly.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/device.h"

namespace tessera::bench {

struct MachineInfo {
  std::string hostname;
  std::string cpu;  // /proc/cpuinfo's model name
  int64_t cores = 0;
  double memory_gib = 0;
  std::string os;  // uname: system, release, machine
};

struct DeviceInfo {
  std::string device;  // "cuda:0", "cpu"
  std::string name;    // the backend's device name
  double memory_gib = 0;
};

MachineInfo machine_info();
DeviceInfo device_info(Device device);
// $TESSERA_COMMIT when set (a copy of the tree without .git, e.g. on the GPU machine), else
// `git describe --always --dirty` in the source tree this binary was built from, else "unknown".
std::string source_commit();
std::string utc_timestamp();  // now, ISO 8601 ("2026-11-23T06:40:00Z")

}  // namespace tessera::bench
