#include "engine/bench/workload.h"

#include <algorithm>
#include <span>
#include <utility>

#include "engine/sampler.h"
#include "runtime/check.h"
#include "runtime/profiler/profiler.h"

namespace tessera::bench {

namespace {

// Every row greedy: the sweep's decode loop is forward plus greedy pick.
std::vector<SamplingRow> greedy_rows(size_t count) {
  static const SamplingParams greedy = [] {
    SamplingParams params;
    params.temperature = 0;
    return params;
  }();
  return std::vector<SamplingRow>(count, SamplingRow{&greedy, 0, 0, {}, {}});
}

}  // namespace

Workload::Workload(ModelExecutor& runner, int64_t token_budget, int64_t max_sequences_per_step,
                   bool async_scheduling)
    : runner_(runner),
      blocks_(runner.num_kv_blocks(), runner.options().block_size),
      token_budget_(token_budget),
      max_sequences_per_step_(max_sequences_per_step),
      async_scheduling_(async_scheduling) {
  TESSERA_CHECK(token_budget > 0 && max_sequences_per_step > 0, "empty step budget");
}

void Workload::add_prompt(int64_t length, uint64_t seed) {
  const auto vocab = static_cast<uint64_t>(runner_.model().config().vocab_size);
  const auto index = static_cast<uint64_t>(sequences_.size());
  Sequence sequence;
  for (int64_t position = 0; position < length; ++position) {
    uint64_t mixed = (seed + index) * 0x9e3779b97f4a7c15ull +
                     static_cast<uint64_t>(position) * 0xbf58476d1ce4e5b9ull + 12345;
    mixed ^= mixed >> 31;
    sequence.tokens.push_back(static_cast<int32_t>(mixed % vocab));
  }
  sequences_.push_back(std::move(sequence));
}

void Workload::advance() {
  drain();
  // The tokens pending now; the ids sampled on the way wait for the next call.
  std::vector<int64_t> target(sequences_.size());
  for (size_t s = 0; s < sequences_.size(); ++s)
    target[s] = static_cast<int64_t>(sequences_[s].tokens.size());
  size_t next = 0;  // sequences before it have nothing pending
  while (true) {
    while (next < sequences_.size() && sequences_[next].cached == target[next]) ++next;
    if (next == sequences_.size()) return;
    std::vector<SequenceInput> batch;
    std::vector<size_t> members;
    std::vector<bool> finishing;
    int64_t budget = token_budget_;
    for (size_t s = next; s < sequences_.size() && budget > 0 &&
                          static_cast<int64_t>(batch.size()) < max_sequences_per_step_;
         ++s) {
      Sequence& sequence = sequences_[s];
      const int64_t pending = target[s] - sequence.cached;
      if (pending == 0) continue;
      const int64_t take = std::min(pending, budget);
      blocks_.allocate(static_cast<SequenceId>(s), sequence.cached + take);
      batch.push_back(SequenceInput{std::span(sequence.tokens).subspan(sequence.cached, take),
                                    sequence.cached,
                                    blocks_.block_table(static_cast<SequenceId>(s))});
      members.push_back(s);
      finishing.push_back(take == pending);
      budget -= take;
    }
    const std::vector<SampledToken> ids =
        execute_and_sample(runner_, batch, Tensor(), greedy_rows(batch.size())).wait();
    TESSERA_CHECK(ids.size() == members.size(), "{} ids for {} sequences", ids.size(),
                  members.size());
    for (size_t i = 0; i < members.size(); ++i) {
      Sequence& sequence = sequences_[members[i]];
      sequence.cached += static_cast<int64_t>(batch[i].token_ids.size());
      // A chunk that ends inside the prompt samples nothing a decode loop would keep.
      if (finishing[i]) sequence.tokens.push_back(ids[i].id);
    }
  }
}

void Workload::decode_step() {
  static const int32_t placeholder = 0;  // a token the runner takes from the draws instead
  TESSERA_CHECK(static_cast<int64_t>(sequences_.size()) <= max_sequences_per_step_,
                "a decode step of {} sequences, at most {} per step", sequences_.size(),
                max_sequences_per_step_);
  std::vector<SequenceInput> batch;
  for (size_t s = 0; s < sequences_.size(); ++s) {
    Sequence& sequence = sequences_[s];
    const int64_t known = static_cast<int64_t>(sequence.tokens.size());
    TESSERA_CHECK(known + sequence.in_flight - sequence.cached == 1,
                  "sequence {} has {} tokens to compute, a decode step takes one", s,
                  known + sequence.in_flight - sequence.cached);
    blocks_.allocate(static_cast<SequenceId>(s), sequence.cached + 1);
    const std::span<const int32_t> table = blocks_.block_table(static_cast<SequenceId>(s));
    if (sequence.in_flight > 0)
      batch.push_back(
          SequenceInput{std::span(&placeholder, 1), sequence.cached, table, sequence.newest_row});
    else
      batch.push_back(SequenceInput{std::span(sequence.tokens).subspan(sequence.cached, 1),
                                    sequence.cached, table});
  }
  std::optional<InFlightStep> previous = std::move(in_flight_);
  in_flight_.reset();
  InFlightStep step{
      execute_and_sample(runner_, batch, previous ? previous->draws.device_ids() : Tensor(),
                         greedy_rows(batch.size())),
      {}};
  for (size_t s = 0; s < sequences_.size(); ++s) {
    Sequence& sequence = sequences_[s];
    ++sequence.cached;
    ++sequence.in_flight;
    sequence.newest_row = static_cast<int32_t>(s);
    step.members.push_back(s);
  }
  in_flight_ = std::move(step);
  if (previous) collect(*previous);
  if (!async_scheduling_) drain();
}

void Workload::drain() {
  if (!in_flight_) return;
  collect(*in_flight_);
  in_flight_.reset();
}

void Workload::collect(InFlightStep& step) {
  const std::vector<SampledToken> ids = step.draws.wait();
  for (size_t i = 0; i < step.members.size(); ++i) {
    Sequence& sequence = sequences_[step.members[i]];
    sequence.tokens.push_back(ids[i].id);
    --sequence.in_flight;
  }
}

}  // namespace tessera::bench
