#include "kernels/cuda/gemm/l2_prefetch.h"

#include <algorithm>

#include "kernels/cuda/gpu_runtime.h"

namespace tessera::gpu {

L2Prefetch l2_prefetch_of(const Tensor* weight, int device) {
#if defined(TESSERA_GPU_HIP)
  (void)weight, (void)device;
  return {};
#else
  if (weight == nullptr || reinterpret_cast<uintptr_t>(weight->data_ptr()) % 16 != 0) return {};
  const DeviceLimits& limits = device_limits(device);
  if (limits.compute_major < 9) return {};
  const int64_t cap = static_cast<int64_t>(limits.l2_bytes / kL2PrefetchShare);
  return {weight->data_ptr(),
          std::min<int64_t>(static_cast<int64_t>(weight->nbytes()), cap) / 16 * 16};
#endif
}

}  // namespace tessera::gpu
