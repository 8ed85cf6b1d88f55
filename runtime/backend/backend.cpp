#include "runtime/backend/backend.h"

#include <array>
#include <mutex>
#include <vector>

#include "runtime/backend/backend_modules.h"
#include "runtime/check.h"

namespace tessera {

namespace {

std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes>& backends() {
  static std::array<std::unique_ptr<DeviceBackend>, kNumDeviceTypes> table;
  return table;
}

}  // namespace

void register_backend(std::unique_ptr<DeviceBackend> backend) {
  auto& slot = backends()[static_cast<size_t>(backend->type())];
  TESSERA_CHECK(slot == nullptr, "backend {} registered twice", device_type_name(backend->type()));
  slot = std::move(backend);
}

DeviceBackend* registered_backend(DeviceType type) {
  return backends()[static_cast<size_t>(type)].get();
}

DeviceBackend* find_backend(DeviceType type) {
  load_backend_module(type);
  return registered_backend(type);
}

DeviceBackend& backend(Device device) {
  DeviceBackend* found = find_backend(device.type);
  if (found == nullptr) {
    throw Error(fmt::format("device {} is not available: {}", device.str(),
                            load_backend_module(device.type).reason));
  }
  int count = found->device_count();
  TESSERA_REQUIRE(device.index >= 0 && device.index < count,
                  "device {} is not available: {} device(s) of type {} found", device.str(), count,
                  device_type_name(device.type));
  return *found;
}

bool device_available(Device device) {
  DeviceBackend* found = find_backend(device.type);
  return found != nullptr && device.index >= 0 && device.index < found->device_count();
}

bool first_gpu(Device* device) {
  for (DeviceType type : {DeviceType::cuda, DeviceType::hip}) {
    if (device_available(Device{type, 0})) {
      *device = Device{type, 0};
      return true;
    }
  }
  return false;
}

namespace {

class CopiedReadback final : public HostReadback {
 public:
  explicit CopiedReadback(size_t bytes) : bytes_(bytes) {}
  const void* wait() override { return bytes_.data(); }
  void* data() { return bytes_.data(); }

 private:
  std::vector<unsigned char> bytes_;
};

}  // namespace

std::unique_ptr<HostReadback> DeviceBackend::start_readback(const void* src, Device src_device,
                                                            size_t bytes) {
  auto readback = std::make_unique<CopiedReadback>(bytes);
  copy(readback->data(), kCPU, src, src_device, bytes);
  return readback;
}

void DeviceBackend::upload(void* dst, Device dst_device, const void* src, size_t bytes) {
  copy(dst, dst_device, src, kCPU, bytes);
}

bool DeviceBackend::hold_stream(Stream&) {
  return false;
}

size_t DeviceBackend::release_streams() {
  return 0;
}

const void* DeviceBackend::load_kernel_image(int, const std::string&, const std::string& entry) {
  throw Error(fmt::format("devices of type {} cannot load generated code (kernel {})",
                          device_type_name(type()), entry));
}

void DeviceBackend::launch_kernel(const void*, int64_t, int, void**, Stream&) {
  throw Error(
      fmt::format("devices of type {} cannot launch generated code", device_type_name(type())));
}

const RuntimeCompiler* DeviceBackend::runtime_compiler() const {
  return nullptr;
}

StreamGuard::StreamGuard(Stream& stream)
    : device_(stream.device()), previous_(&backend(device_).current_stream(device_.index)) {
  backend(device_).set_current_stream(device_.index, &stream);
}

StreamGuard::~StreamGuard() {
  backend(device_).set_current_stream(device_.index, previous_);
}

}  // namespace tessera
