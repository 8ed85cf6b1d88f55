// Kernels of all_reduce and all_gather (compile/ops/collective.cpp) on every device type: the
// communicator of this thread's rank does the work, queued on the current stream on a GPU.
#include "runtime/check.h"
#include "runtime/communicator.h"
#include "runtime/kernel_registry.h"

namespace tessera {
namespace {

void all_reduce_kernel(const KernelArgs& args) {
  Communicator& communicator = require_communicator("all_reduce");
  communicator.all_reduce_sum(args.inputs[0], args.outputs[0]);
}

void all_gather_kernel(const KernelArgs& args) {
  Communicator& communicator = require_communicator("all_gather");
  TESSERA_REQUIRE(args.attributes.get_int("world_size") == communicator.size(),
                  "all_gather: the graph was traced for {} ranks but this group has {}",
                  args.attributes.get_int("world_size"), communicator.size());
  communicator.all_gather(args.inputs[0], args.outputs[0]);
}

TESSERA_REGISTER_KERNEL("all_reduce", DeviceType::cpu, all_reduce_kernel);
TESSERA_REGISTER_KERNEL("all_reduce", DeviceType::cuda, all_reduce_kernel);
TESSERA_REGISTER_KERNEL("all_reduce", DeviceType::hip, all_reduce_kernel);
TESSERA_REGISTER_KERNEL("all_gather", DeviceType::cpu, all_gather_kernel);
TESSERA_REGISTER_KERNEL("all_gather", DeviceType::cuda, all_gather_kernel);
TESSERA_REGISTER_KERNEL("all_gather", DeviceType::hip, all_gather_kernel);

}  // namespace
}  // namespace tessera
