// A request as the engine holds it (prompt, sampling, progress through the KV cache, output so
// far) and what it hands back: RequestOutput deltas through a thread-safe OutputStream that the
// HTTP thread reads while the engine thread writes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "engine/text_stream.h"

namespace tessera {

using Clock = std::chrono::steady_clock;

enum class FinishReason { none, stop, length, abort, error };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "abort", "error"

// The logprobs of a token whose text is in the output: `text`, which starts `text_offset`
// characters (code points) into the request's output text.
struct OutputLogprob {
  SampledToken token;
  int64_t text_offset = 0;
  std::string text;
};

// What one engine step added to a request: new tokens and the text they completed.
struct RequestOutput {
  std::string request_id;
  std::vector<int32_t> token_ids;
  std::string text;
  std::vector<OutputLogprob> logprobs;  // per new token shown in `text`, when the request asked
  FinishReason finish_reason = FinishReason::none;
  std::string stop_reason;  // the stop string or token id that ended it
  std::string error;        // why, when finish_reason is error
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // so far
  int64_t cached_tokens = 0;      // prompt tokens found in the prefix cache
  bool finished() const { return finish_reason != FinishReason::none; }
};

// Engine thread -> reader. Closed after the finishing output; pop waits with a timeout so a
// reader can notice its client is gone.
class OutputStream {
 public:
  void push(RequestOutput output);
  // The next output, or nothing when `timeout` passed first.
  std::optional<RequestOutput> pop(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestOutput> outputs_;
};

enum class RequestStatus { waiting, running, finished };

struct Request {
  std::string id;
  SequenceId sequence = 0;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::vector<int32_t> all_ids;  // prompt then output: what the KV cache must hold
  SamplingParams params;
  int64_t priority = 0;  // with the priority policy: lower runs first (engine/scheduler.h)
  uint64_t seed = 0;
  std::vector<int32_t> stop_ids;  // end tokens (unless ignore_eos) and stop_token_ids
  int64_t max_total_tokens = 0;   // prompt + max_tokens, within max_model_len
  RequestStatus status = RequestStatus::waiting;
  int64_t num_computed_tokens = 0;  // of all_ids, in the KV cache
  int64_t num_cached_tokens = 0;    // of the prompt, taken from the prefix cache
  int64_t num_preemptions = 0;
  // Tokens drawn by steps still in flight (asynchronous scheduling): counted, not yet in
  // output_ids; the newest is row `pending_row` of the newest step's draws, on the device.
  int64_t num_pending_tokens = 0;
  int32_t pending_row = -1;
  std::unique_ptr<TextStream> text;
  std::optional<GrammarMatcher> matcher;  // where the output is in params.grammar
  // Speculative decoding: tokens proposed to follow all_ids, scored by this step's forward after
  // the request's own new token (the scheduler trims them to its budget).
  std::vector<int32_t> proposal;
  // Logprobs of tokens pushed into `text` whose text is not shown yet, by push number.
  std::deque<std::pair<int64_t, SampledToken>> unshown_logprobs;
  std::shared_ptr<OutputStream> stream;
  Clock::time_point arrival = Clock::now();
  std::optional<Clock::time_point> first_token_time;
  Clock::time_point last_token_time;

  int64_t num_tokens() const { return static_cast<int64_t>(all_ids.size()); }
  // With the drawn tokens not on the host yet: what the KV cache will hold.
  int64_t num_tokens_with_pending() const { return num_tokens() + num_pending_tokens; }
};

}  // namespace tessera
