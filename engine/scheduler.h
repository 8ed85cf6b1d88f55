// Continuous batching, vLLM V1's way: every step, first the running requests (decodes, and
// prefills still in progress), then waiting ones, under a token budget (max_num_batched_tokens)
// and a sequence budget (max_num_seqs). A prompt longer than what is left of the budget is split
// over steps (chunked prefill). When the KV cache has no block for a running request, the most
// recently admitted one is preempted: its blocks are freed and it goes back to the front of the
// queue, to be recomputed (prompt and output so far) when blocks are free again. A request's token
// drawn by a step still in flight (asynchronous scheduling, engine/llm_engine.h) counts as a
// token to compute: the next step takes it on the device. A decoding request's proposed tokens
// (speculative decoding, Request::proposal) are computed after its own with what the budget and
// the free blocks leave: they are trimmed rather than take another request's token or preempt.
//
// With the priority policy (vLLM's --scheduling-policy priority) both queues are kept in order of
// (priority, arrival), lower priority values first: the waiting request that runs next is the
// first of that order, the running one that gives way is the last, and a waiting request that
// does not fit preempts running ones of a strictly lower priority (higher value) until it does.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/engine_config.h"
#include "engine/kv_cache_manager.h"
#include "engine/request.h"

namespace tessera {

struct ScheduledRequest {
  Request* request = nullptr;
  int64_t num_new_tokens = 0;  // from request->num_computed_tokens on
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  std::vector<Request*> preempted;  // this step, back in the waiting queue
  int64_t num_batched_tokens = 0;
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KVCacheManager& blocks);

  void add(Request* request);  // at the back of the waiting queue (fcfs) or in priority order
  // Picks this step's requests and gives each the blocks its new tokens need.
  SchedulerOutput schedule();
  // Takes the request out of whichever queue holds it and frees its blocks.
  void remove(Request* request);

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  const SchedulerConfig& config() const { return config_; }

 private:
  void preempt(Request* request, SchedulerOutput& output);
  // Priority policy: preempts running requests of a lower priority than the first waiting one
  // until it fits.
  void make_room_for_priority(SchedulerOutput& output);
  bool fits(const Request& waiting) const;  // a running slot and the blocks its next chunk needs
  // Puts `request` into `queue` after every request that runs before it.
  template <typename Queue>
  void insert_in_order(Queue& queue, Request* request) const;
  bool by_priority() const { return config_.policy == SchedulingPolicy::priority; }

  SchedulerConfig config_;
  KVCacheManager& blocks_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // in order of admission, or of priority
};

}  // namespace tessera
