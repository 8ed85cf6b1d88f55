#include "support/runner_steps.h"

#include <gtest/gtest.h>

#include "engine/kv_cache_manager.h"

namespace tessera::testing {

RunnerConfig runner_config(CompilationMode mode) {
  RunnerConfig config;
  config.compilation.mode = mode;
  config.compilation.custom_ops = {"all"};
  return config;
}

std::vector<std::vector<float>> logits_by_chunks(ModelRunner& runner,
                                                 const std::vector<int32_t>& ids,
                                                 const std::vector<int64_t>& chunks) {
  KVCacheManager blocks(runner.num_kv_blocks(), runner.config().cache.block_size);
  std::vector<std::vector<float>> rows;
  int64_t done = 0;
  for (int64_t chunk : chunks) {
    EXPECT_TRUE(blocks.can_allocate(0, done + chunk));
    blocks.allocate(0, done + chunk);
    std::vector<int32_t> part(ids.begin() + done, ids.begin() + done + chunk);
    SequenceInput input{part, done, blocks.block_table(0)};
    rows.push_back(logits_to_host(runner.execute(std::span(&input, 1))).at(0));
    done += chunk;
  }
  return rows;
}

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams params;
  params.temperature = 0;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  return params;
}

}  // namespace tessera::testing
