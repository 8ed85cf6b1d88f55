#include "compile/codegen/codegen_target.h"

#include <map>

#include "runtime/backend/backend_modules.h"
#include "runtime/check.h"

namespace tessera {
namespace {

std::map<DeviceType, CodegenTargetFactory>& targets() {
  static std::map<DeviceType, CodegenTargetFactory> registered;
  return registered;
}

}  // namespace

bool register_codegen_target(DeviceType type, CodegenTargetFactory factory) {
  TESSERA_CHECK(!targets().count(type), "a codegen target for {} is registered twice",
                Device{type, 0}.str());
  targets()[type] = std::move(factory);
  return true;
}

bool has_codegen_target(DeviceType type) {
  load_backend_module(type);  // a GPU type's target registers as its module loads
  return targets().count(type) > 0;
}

std::unique_ptr<CodegenTarget> make_codegen_target(Device device, const std::string& cache_dir) {
  load_backend_module(device.type);
  auto found = targets().find(device.type);
  TESSERA_REQUIRE(found != targets().end(),
                  "no code generator for {}: fused kernels cannot run there; set "
                  "compilation.pass_config.enable_fusion=false or compilation.mode=traced",
                  device.str());
  return found->second(device, cache_dir);
}

}  // namespace tessera
