// Driving a ModelRunner in tests: one sequence fed in steps, its KV-cache blocks held by a fresh
// KVCacheManager, each step's last-token logits copied to the host.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runner/model_runner.h"
#include "engine/sampling_params.h"

namespace tessera::testing {

// A runner config in `mode` with every custom op a kernel ("all"), whatever the mode's default:
// the runners the tests compare were written against that.
RunnerConfig runner_config(CompilationMode mode);

// Feeds `ids` in steps of the given chunk sizes (chunks of 1 are decode steps); the last token's
// logits of each step.
std::vector<std::vector<float>> logits_by_chunks(ModelRunner& runner,
                                                 const std::vector<int32_t>& ids,
                                                 const std::vector<int64_t>& chunks);

// Greedy sampling of exactly max_tokens tokens (end tokens do not stop it): the engine tests'
// requests.
SamplingParams greedy(int64_t max_tokens);

}  // namespace tessera::testing
