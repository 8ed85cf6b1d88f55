#include "engine/model_executor.h"

#include "compile/ops/ops.h"
#include "kernels/profiler.h"

namespace tessera {

Tensor ModelExecutor::execute_greedy(std::span<const SequenceInput> batch,
                                     const Tensor& sampled_ids) {
  const Tensor logits = execute(batch, sampled_ids);
  ProfileRegion region("sampling");  // names the greedy pick's launch in a profile
  return ops::argmax(logits);
}

}  // namespace tessera
