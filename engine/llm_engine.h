// The engine: requests in, tokens out, one step at a time (vLLM's LLMEngine). Each step the
// scheduler picks the batch, the runner computes it, the sampler draws a token for every sequence
// whose prompt is done, and each request's TextStream turns tokens into text and finds stop
// strings. Outputs go to each request's OutputStream and back to the caller. Not thread-safe:
// AsyncEngine (engine/async_engine.h) runs it on its own thread for the server.
//
// Asynchronous scheduling (SchedulerConfig::async_scheduling, vLLM's --async-scheduling): a step
// is launched before the step before it has reached the host, and then that one is collected.
// A token still in flight counts for the scheduler as one to compute, and the new step takes it
// from the old step's draws on the device, so the host schedules, builds inputs and reads
// tokens while the device computes. What is learned one step late costs one wasted row: a
// request that stopped (end token, stop string) was computed once more, and that row is dropped.
// A request that samples with penalties needs its tokens on the host, so a step holding one is
// collected before the next is scheduled. A request with a grammar (structured output) needs them
// for its token mask: a step holding one launches its forward first, then collects the step
// before, advances the grammars and computes the masks on the host while the device computes,
// then launches the draws.
//
// Speculative decoding (EngineConfig::speculative): before each step, a decoding request's own
// tokens propose its next ones (prompt lookup), and the step scores the request's new token and
// the proposal in one forward, a logits row each. Every row is drawn as a decode step would draw
// it (the same sampler, seed and output index, the proposal before it counted as output), and
// the proposal is accepted while the draws agree with it; the first draw that does not, or the
// one after the last proposal, comes too. For a proposal of fixed tokens this is the rejection
// sampling of speculative decoding (accept x with probability p(x), else draw from p without x),
// so the output is the output without speculation, token for token when seeded. Requests under a
// grammar do not speculate; steps are collected before the next one is scheduled.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "engine/runner/model_runner.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/speculative/ngram_proposer.h"
#include "models/tokenizer.h"

namespace tessera {

class LLMEngine {
 public:
  // Reads config.scheduler (a budget within the runner's), config.cache.enable_prefix_caching
  // and config.seed; the KV cache's blocks are the runner's, max_model_len the model's positions.
  LLMEngine(ModelExecutor& runner, const Tokenizer& tokenizer, const EngineConfig& config);

  // Throws tessera::Error naming the field when the request cannot run: empty prompt, token ids
  // outside the vocabulary, too long for max_model_len, bad sampling values. Reads only what
  // never changes, so any thread may call it.
  void validate_request(const std::vector<int32_t>& prompt_ids, const SamplingParams& params,
                        int64_t priority = 0) const;
  // Validates (also that the id is new) and queues the request; its outputs go to `stream`
  // (a new one when null), which is returned.
  std::shared_ptr<OutputStream> add_request(const std::string& id, std::vector<int32_t> prompt_ids,
                                            const SamplingParams& params,
                                            std::shared_ptr<OutputStream> stream = nullptr,
                                            int64_t priority = 0);
  // Finishes the request now with reason abort and frees its blocks; unknown ids are ignored.
  void abort(const std::string& id);
  // Finishes every request with reason error and this message (after an engine fault).
  void fail_all(const std::string& message);
  // One scheduling step; the outputs it produced (also pushed to the streams).
  std::vector<RequestOutput> step();
  bool has_unfinished() const { return !requests_.empty(); }
  size_t num_unfinished() const { return requests_.size(); }
  std::vector<std::string> unfinished_ids() const;

  int64_t max_model_len() const { return max_model_len_; }
  int64_t vocab_size() const { return runner_.model().config().vocab_size; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const KVCacheManager& kv_cache() const { return blocks_; }
  const Scheduler& scheduler() const { return scheduler_; }
  SharedMetrics& metrics() { return metrics_; }

 private:
  // A launched step: its draws and, per row, the sequence of the request it drew for (none: a
  // prefill chunk that ends inside its prompt).
  // A request's proposal verified by a step: its 1 + proposal.size() rows from first_row on.
  struct Verification {
    SequenceId sequence = 0;
    size_t first_row = 0;
    std::vector<int32_t> proposal;
  };
  struct InFlightStep {
    SampledBatch draws;
    std::vector<std::optional<SequenceId>> rows;  // none for a verification's rows too
    std::vector<Verification> verifications;
    bool needs_host_tokens = false;  // a row samples with penalties
    bool collected = false;          // its tokens went to their requests
  };
  // Runs the scheduled requests' forward and launches their draws: the new in_flight_. A token
  // still in flight is taken from `previous`'s draws on the device; when a grammar needs it on
  // the host, `previous` is collected between the forward and the draws.
  void launch(const SchedulerOutput& scheduled, std::optional<InFlightStep>& previous,
              std::vector<RequestOutput>& outputs);
  // The token masks of the rows that draw under a grammar; a request whose grammar fails (it
  // passed a limit) is finished with the error and its row dropped.
  // `last_rows`: each request's last logits row (a request verifying a proposal has several).
  TokenMasks grammar_masks(std::vector<Request*>& requests, const std::vector<bool>& draws,
                           std::span<const int32_t> last_rows, std::vector<RequestOutput>& outputs);
  // Waits for the step's tokens and hands them to their requests (those still unfinished).
  void collect(InFlightStep& step, std::vector<RequestOutput>& outputs);
  // A verification's tokens: the proposed ones while the draws agree with them, then the first
  // draw that does not (or the one after the last proposal); the rejected slots are given back.
  void accept_verified(const Verification& verification, std::span<const SampledToken> tokens,
                       std::vector<RequestOutput>& outputs);
  // Pushes a collected output to its request's stream (finishing the request when it is done).
  void deliver(Request& request, RequestOutput& output, std::vector<RequestOutput>& outputs);
  // Speculative decoding: the proposal of every running request that decodes next step.
  void propose();
  void finish(Request& request, RequestOutput& output, FinishReason reason);
  // Appends the sampled token, turns it into text, checks every stop condition.
  void append_token(Request& request, const SampledToken& token, RequestOutput& output);
  void publish_gauges();

  ModelExecutor& runner_;
  const Tokenizer& tokenizer_;
  uint64_t seed_ = 0;  // seeds of requests that give none derive from it
  SpeculativeConfig speculative_;
  NgramSettings ngram_;
  int64_t max_model_len_ = 0;
  KVCacheManager blocks_;
  Scheduler scheduler_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::unordered_map<SequenceId, Request*> by_sequence_;  // the same requests
  SequenceId next_sequence_ = 0;
  std::optional<InFlightStep> in_flight_;  // asynchronous scheduling: the step not collected yet
  uint64_t requests_added_ = 0;
  SharedMetrics metrics_;
};

// Derives the seed of the index-th sequence of a request (n > 1); index 0 keeps the seed.
uint64_t derive_seed(uint64_t seed, uint64_t index);

}  // namespace tessera
