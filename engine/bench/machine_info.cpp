#include "engine/bench/machine_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>

#include "runtime/backend/backend.h"

#ifndef TESSERA_SOURCE_DIR
#define TESSERA_SOURCE_DIR "."
#endif

namespace tessera::bench {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The value after "key:" on the first line of `path` that starts with `key`, trimmed.
std::string field_of(const char* path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (!line.starts_with(key)) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t begin = line.find_first_not_of(" \t", colon + 1);
    return begin == std::string::npos ? "" : line.substr(begin);
  }
  return "";
}

}  // namespace

MachineInfo machine_info() {
  MachineInfo info;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) info.hostname = host.data();
  info.cpu = field_of("/proc/cpuinfo", "model name");
  info.cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  const std::string memory = field_of("/proc/meminfo", "MemTotal");  // "24576000 kB"
  info.memory_gib = std::strtod(memory.c_str(), nullptr) * 1024.0 / kGiB;
  utsname names{};
  if (uname(&names) == 0)
    info.os = std::string(names.sysname) + " " + names.release + " " + names.machine;
  return info;
}

DeviceInfo device_info(Device device) {
  DeviceBackend& device_backend = backend(device);
  DeviceInfo info{device.str(), device_backend.device_name(device.index), 0};
  info.memory_gib = static_cast<double>(device_backend.memory_info(device.index).first) / kGiB;
  return info;
}

std::string source_commit() {
  if (const char* given = std::getenv("TESSERA_COMMIT"); given != nullptr && *given != '\0')
    return given;
  const std::string command = std::string("git -C '") + TESSERA_SOURCE_DIR +
                              "' describe --always --dirty --abbrev=12 2>/dev/null";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "unknown";
  std::array<char, 128> buffer{};
  std::string text;
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) text += buffer.data();
  const int status = pclose(pipe);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return status == 0 && !text.empty() ? text : "unknown";
}

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text.data();
}

}  // namespace tessera::bench
