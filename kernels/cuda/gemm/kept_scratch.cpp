#include "kernels/cuda/gemm/kept_scratch.h"

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "runtime/tensor.h"

namespace tessera::gpu {

void* kept_scratch(Device device, gpuStream_t stream, int64_t bytes, const char* use) {
  static std::mutex mutex;
  static std::map<std::tuple<int, gpuStream_t, const char*>, std::vector<Tensor>> buffers;
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<Tensor>& kept = buffers[{device.index, stream, use}];
  if (kept.empty() || static_cast<int64_t>(kept.back().nbytes()) < bytes)
    kept.push_back(Tensor::empty({(bytes + 3) / 4}, DType::i32, device));
  return kept.back().data_ptr();
}

}  // namespace tessera::gpu
