#include "compile/compilation_config.h"

#include <algorithm>

#include "compile/custom_op_config.h"

namespace tessera {

CUDAGraphMode CompilationConfig::resolved_cudagraph_mode(bool gpu) const {
  if (cudagraph_mode) return *cudagraph_mode;
  return gpu && mode == CompilationMode::compiled ? CUDAGraphMode::full_and_piecewise
                                                  : CUDAGraphMode::none;
}

CustomOpConfig CompilationConfig::custom_op_config() const {
  return CustomOpConfig::parse(custom_ops, custom_ops_default_enabled());
}

std::vector<int64_t> CompilationConfig::resolved_capture_sizes(
    int64_t max_num_batched_tokens) const {
  int64_t limit = std::min(max_cudagraph_capture_size, max_num_batched_tokens);
  std::vector<int64_t> sizes = cudagraph_capture_sizes;
  if (sizes.empty()) {
    for (int64_t s : {1, 2, 4}) sizes.push_back(s);
    for (int64_t s = 8; s <= 248; s += 8) sizes.push_back(s);
    for (int64_t s = 256; s <= max_cudagraph_capture_size; s += 16) sizes.push_back(s);
  }
  std::erase_if(sizes, [&](int64_t s) { return s > limit || s < 1; });
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

}  // namespace tessera
