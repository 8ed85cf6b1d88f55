// Sequences driven through a ModelRunner the way a scheduler would drive them, for the sweep's
// measurements: each step takes at most a token budget and a number of sequences (chunked
// prefill), runs the forward, picks every finished sequence's next token greedily on the device
// and appends it (the ids come back to the host), so decode steps feed the sampled ids back in;
// with asynchronous scheduling, on the device, before the host has them.
// It holds its sequences' KV blocks in its own KVCacheManager over the runner's cache.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/runner/model_runner.h"
#include "engine/sampler.h"

namespace tessera::bench {

class Workload {
 public:
  // async_scheduling: decode_step launches a step before collecting the one before it, as the
  // engine does with engine.async_scheduling (engine/llm_engine.h).
  Workload(ModelExecutor& runner, int64_t token_budget, int64_t max_sequences_per_step,
           bool async_scheduling = false);

  // A sequence whose prompt is `length` deterministic pseudo-random ids (they differ with `seed`
  // and the sequence's index; the values do not change the work, a real mix keeps the embedding
  // gathers honest).
  void add_prompt(int64_t length, uint64_t seed);
  // Runs every pending token: a prompt's whole prefill, or one decode step for every sequence
  // when each holds one sampled token. Each step is collected before the next; the step in
  // flight from decode_step first.
  void advance();
  // One decode step of every sequence, all in one batch (each holds one token to compute: on the
  // host or in flight). With asynchronous scheduling its ids are still in flight when it returns
  // (the step before is collected); otherwise they are on the host.
  void decode_step();
  // Collects the step in flight, if any.
  void drain();

  size_t size() const { return sequences_.size(); }

 private:
  struct Sequence {
    std::vector<int32_t> tokens;  // prompt, then the sampled ids on the host
    int64_t cached = 0;           // tokens already in the KV cache (or queued to be)
    int64_t in_flight = 0;        // drawn by steps not collected yet
    int32_t newest_row = -1;      // the newest of them: its row in in_flight_'s draws
  };
  struct InFlightStep {
    SampledBatch draws;
    std::vector<size_t> members;  // the sequence of each row
  };
  void collect(InFlightStep& step);

  ModelExecutor& runner_;
  KVCacheManager blocks_;
  int64_t token_budget_;
  int64_t max_sequences_per_step_;
  bool async_scheduling_;
  std::vector<Sequence> sequences_;
  std::optional<InFlightStep> in_flight_;
};

}  // namespace tessera::bench
