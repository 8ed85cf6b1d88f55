#include "runtime/communicator.h"

#include <array>
#include <mutex>

#include "runtime/backend/backend.h"
#include "runtime/check.h"

namespace tessera {
namespace {

thread_local Communicator* current = nullptr;

std::mutex factories_mutex;
std::array<CommunicatorFactory, kNumDeviceTypes> factories{};

}  // namespace

bool register_communicator_factory(DeviceType type, CommunicatorFactory factory) {
  std::lock_guard lock(factories_mutex);
  factories[static_cast<size_t>(type)] = factory;
  return true;
}

std::vector<std::unique_ptr<Communicator>> create_communicators(DeviceType type,
                                                                std::span<const int> devices) {
  TESSERA_REQUIRE(!devices.empty(), "a communicator group needs at least one rank");
  if (type != DeviceType::cpu) backend(Device{type, devices.front()});  // loads the module
  CommunicatorFactory factory = nullptr;
  {
    std::lock_guard lock(factories_mutex);
    factory = factories[static_cast<size_t>(type)];
  }
  TESSERA_REQUIRE(factory != nullptr,
                  "engine.tensor_parallel_size {}: {} devices have no collectives in this build",
                  devices.size(), device_type_name(type));
  return factory(devices);
}

Communicator* current_communicator() {
  return current;
}

Communicator& require_communicator(const char* op) {
  TESSERA_REQUIRE(current != nullptr,
                  "{}: no tensor-parallel group on this thread; the op runs only inside a rank of "
                  "a run with engine.tensor_parallel_size > 1",
                  op);
  return *current;
}

CommunicatorScope::CommunicatorScope(Communicator* communicator) : previous_(current) {
  current = communicator;
}

CommunicatorScope::~CommunicatorScope() {
  current = previous_;
}

}  // namespace tessera
