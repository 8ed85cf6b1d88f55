#include "engine/runner/model_executor.h"

#include "engine/sampler.h"

namespace tessera {

Tensor ModelExecutor::execute_greedy(std::span<const SequenceInput> batch,
                                     const Tensor& sampled_ids) {
  return greedy_ids(execute(batch, sampled_ids));
}

}  // namespace tessera
