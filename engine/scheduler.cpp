#include "engine/scheduler.h"

#include <algorithm>

#include "runtime/check.h"

namespace tessera {

Scheduler::Scheduler(SchedulerLimits limits, KVCacheManager& blocks)
    : limits_(limits), blocks_(blocks) {
  TESSERA_CHECK(limits_.max_num_batched_tokens > 0 && limits_.max_num_seqs > 0);
}

void Scheduler::add(Request* request) {
  request->status = RequestStatus::waiting;
  waiting_.push_back(request);
}

void Scheduler::preempt(Request* request, SchedulerOutput& output) {
  blocks_.free(request->sequence);
  request->num_computed_tokens = 0;
  request->status = RequestStatus::waiting;
  ++request->num_preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), request));
  waiting_.push_front(request);
  output.preempted.push_back(request);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput output;
  int64_t budget = limits_.max_num_batched_tokens;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* request = running_[i];
    if (request->num_tokens_with_pending() >= request->max_total_tokens) {
      ++i;  // its last token is in flight: it finishes (length) when the host gets it
      continue;
    }
    int64_t count =
        std::min(request->num_tokens_with_pending() - request->num_computed_tokens, budget);
    TESSERA_CHECK(count > 0, "running request {} has nothing to compute", request->id);
    const int64_t total = request->num_computed_tokens + count;
    bool preempted_self = false;
    while (!blocks_.can_allocate(request->sequence, total)) {
      Request* victim = running_.back();  // the most recently admitted
      preempt(victim, output);
      if (victim == request) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    blocks_.allocate(request->sequence, total);
    output.scheduled.push_back({request, count});
    budget -= count;
    ++i;
  }
  // Admit waiting requests only when nothing had to make room this step.
  while (output.preempted.empty() && !waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < limits_.max_num_seqs) {
    Request* request = waiting_.front();
    // Preempted with a token in flight: it is recomputed once that token is on the host.
    if (request->num_pending_tokens > 0) break;
    std::span<const int32_t> tokens(request->all_ids);
    const int64_t cached = blocks_.cached_prefix_tokens(tokens);
    const int64_t count = std::min(request->num_tokens() - cached, budget);
    if (!blocks_.can_allocate_prompt(tokens, cached + count)) break;
    const int64_t taken = blocks_.allocate_prompt(request->sequence, tokens, cached + count);
    TESSERA_CHECK(taken == cached);
    if (request->num_preemptions == 0) request->num_cached_tokens = cached;
    request->num_computed_tokens = cached;
    request->status = RequestStatus::running;
    waiting_.pop_front();
    running_.push_back(request);
    output.scheduled.push_back({request, count});
    budget -= count;
  }
  output.num_batched_tokens = limits_.max_num_batched_tokens - budget;
  return output;
}

void Scheduler::remove(Request* request) {
  auto running = std::find(running_.begin(), running_.end(), request);
  if (running != running_.end()) running_.erase(running);
  auto waiting = std::find(waiting_.begin(), waiting_.end(), request);
  if (waiting != waiting_.end()) waiting_.erase(waiting);
  blocks_.free(request->sequence);
  request->status = RequestStatus::finished;
}

}  // namespace tessera
