#include "runtime/device.h"

#include <charconv>

#include "runtime/check.h"

namespace tessera {

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::cuda:
      return "cuda";
    case DeviceType::hip:
      return "hip";
  }
  return "?";
}

std::string Device::str() const {
  if (type == DeviceType::cpu) return "cpu";
  return fmt::format("{}:{}", device_type_name(type), index);
}

Device parse_device(std::string_view text) {
  auto colon = text.find(':');
  std::string_view kind = text.substr(0, colon);
  int index = 0;
  if (colon != std::string_view::npos) {
    std::string_view digits = text.substr(colon + 1);
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    TESSERA_REQUIRE(error == std::errc() && end == digits.data() + digits.size() && index >= 0,
                    "bad device '{}': the index after ':' must be a number, as in 'cuda:0'", text);
  }
  if (kind == "cpu") return Device{DeviceType::cpu, 0};
  if (kind == "cuda") return Device{DeviceType::cuda, index};
  if (kind == "hip") return Device{DeviceType::hip, index};
  throw Error(fmt::format("unknown device '{}'; valid forms: cpu, cuda, cuda:N, hip, hip:N", text));
}

}  // namespace tessera
