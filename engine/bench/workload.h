// Sequences driven through a ModelRunner the way a scheduler would drive them, for the sweep's
// measurements: each step takes at most a token budget and a number of sequences (chunked
// prefill), runs the forward, picks every finished sequence's next token greedily on the device
// and appends it (the ids come back to the host), so decode steps feed the sampled ids back in.
// It holds its sequences' KV blocks in its own KVCacheManager over the runner's cache.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"

namespace tessera::bench {

class Workload {
 public:
  Workload(ModelExecutor& runner, int64_t token_budget, int64_t max_sequences_per_step);

  // A sequence whose prompt is `length` deterministic pseudo-random ids (they differ with `seed`
  // and the sequence's index; the values do not change the work, a real mix keeps the embedding
  // gathers honest).
  void add_prompt(int64_t length, uint64_t seed);
  // Runs every pending token: a prompt's whole prefill, or one decode step for every sequence
  // when each holds one sampled token.
  void advance();

  size_t size() const { return sequences_.size(); }

 private:
  struct Sequence {
    std::vector<int32_t> tokens;  // prompt, then the sampled ids
    int64_t cached = 0;           // tokens already in the KV cache
  };

  ModelExecutor& runner_;
  KVCacheManager blocks_;
  int64_t token_budget_;
  int64_t max_sequences_per_step_;
  std::vector<Sequence> sequences_;
};

}  // namespace tessera::bench
