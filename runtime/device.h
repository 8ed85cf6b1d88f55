// Where a tensor lives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

enum class DeviceType : uint8_t { cpu, cuda, hip };
inline constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  bool operator==(const Device&) const = default;
  bool is_cpu() const { return type == DeviceType::cpu; }
  std::string str() const;  // "cpu", "cuda:0"
};

inline const Device kCPU{DeviceType::cpu, 0};
const char* device_type_name(DeviceType type);
// Parses "cpu", "cuda", "cuda:1", "hip:0"; throws naming the valid forms.
Device parse_device(std::string_view text);

}  // namespace tessera
