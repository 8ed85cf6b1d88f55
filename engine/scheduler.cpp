#include "engine/scheduler.h"

#include <algorithm>

#include "runtime/check.h"

namespace tessera {

Scheduler::Scheduler(const SchedulerConfig& config, KVCacheManager& blocks)
    : config_(config), blocks_(blocks) {
  TESSERA_CHECK(config_.max_num_batched_tokens > 0 && config_.max_num_seqs > 0);
}

namespace {

// The priority policy's order: lower priority values first, then arrival (sequence ids grow).
bool runs_before(const Request* a, const Request* b) {
  return a->priority != b->priority ? a->priority < b->priority : a->sequence < b->sequence;
}

}  // namespace

template <typename Queue>
void Scheduler::insert_in_order(Queue& queue, Request* request) const {
  queue.insert(std::upper_bound(queue.begin(), queue.end(), request, runs_before), request);
}

void Scheduler::add(Request* request) {
  request->status = RequestStatus::waiting;
  if (by_priority())
    insert_in_order(waiting_, request);
  else
    waiting_.push_back(request);
}

void Scheduler::preempt(Request* request, SchedulerOutput& output) {
  blocks_.free(request->sequence);
  request->num_computed_tokens = 0;
  request->proposal.clear();
  request->status = RequestStatus::waiting;
  ++request->num_preemptions;
  running_.erase(std::find(running_.begin(), running_.end(), request));
  if (by_priority())
    insert_in_order(waiting_, request);
  else
    waiting_.push_front(request);
  output.preempted.push_back(request);
}

bool Scheduler::fits(const Request& waiting) const {
  if (static_cast<int64_t>(running_.size()) >= config_.max_num_seqs) return false;
  std::span<const int32_t> tokens(waiting.all_ids);
  const int64_t cached = blocks_.cached_prefix_tokens(tokens);
  const int64_t count = std::min(waiting.num_tokens() - cached, config_.max_num_batched_tokens);
  return blocks_.can_allocate_prompt(tokens, cached + count);
}

void Scheduler::make_room_for_priority(SchedulerOutput& output) {
  while (!waiting_.empty() && !running_.empty()) {
    const Request& next = *waiting_.front();
    Request* lowest = running_.back();
    if (next.num_pending_tokens > 0 || next.priority >= lowest->priority || fits(next)) return;
    preempt(lowest, output);
  }
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput output;
  if (by_priority()) make_room_for_priority(output);
  const size_t made_room = output.preempted.size();
  int64_t budget = config_.max_num_batched_tokens;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* request = running_[i];
    if (request->num_tokens_with_pending() >= request->max_total_tokens) {
      ++i;  // its last token is in flight: it finishes (length) when the host gets it
      continue;
    }
    const int64_t own =
        std::min(request->num_tokens_with_pending() - request->num_computed_tokens, budget);
    TESSERA_CHECK(own > 0, "running request {} has nothing to compute", request->id);
    // A proposal takes what is left after one token for each running request after this one,
    // and blocks only when they are free: it never costs another request its step, nor a
    // preemption (a prefill never carries one).
    const auto later = static_cast<int64_t>(running_.size() - i - 1);
    int64_t proposed = std::clamp<int64_t>(budget - own - later, 0,
                                           static_cast<int64_t>(request->proposal.size()));
    while (proposed > 0 &&
           !blocks_.can_allocate(request->sequence, request->num_computed_tokens + own + proposed))
      --proposed;
    request->proposal.resize(static_cast<size_t>(proposed));
    const int64_t count = own + proposed;
    const int64_t total = request->num_computed_tokens + count;
    bool preempted_self = false;
    while (!blocks_.can_allocate(request->sequence, total)) {
      Request* victim = running_.back();  // the most recently admitted, or the lowest priority
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
  // Admit waiting requests only when no running request had to make room for another this step.
  while (output.preempted.size() == made_room && !waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
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
    if (by_priority())
      insert_in_order(running_, request);
    else
      running_.push_back(request);
    output.scheduled.push_back({request, count});
    budget -= count;
  }
  output.num_batched_tokens = config_.max_num_batched_tokens - budget;
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
