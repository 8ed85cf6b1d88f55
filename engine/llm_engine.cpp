#include "engine/llm_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "runtime/check.h"
#include "runtime/mix64.h"

namespace tessera {
namespace {

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

uint64_t derive_seed(uint64_t seed, uint64_t index) {
  return index == 0 ? seed : mix64(seed ^ mix64(index));
}

LLMEngine::LLMEngine(ModelExecutor& runner, const Tokenizer& tokenizer, const EngineConfig& config)
    : runner_(runner),
      tokenizer_(tokenizer),
      seed_(static_cast<uint64_t>(config.seed)),
      speculative_(config.speculative),
      max_model_len_(runner.model().max_positions()),
      blocks_(runner.num_kv_blocks(), runner.config().cache.block_size,
              config.cache.enable_prefix_caching),
      scheduler_(config.scheduler, blocks_) {
  // The runner's compiled plans and profiled logits rows are sized for its own budget.
  const SchedulerConfig& limits = runner.config().scheduler;
  TESSERA_REQUIRE(config.scheduler.max_num_batched_tokens <= limits.max_num_batched_tokens &&
                      config.scheduler.max_num_seqs <= limits.max_num_seqs,
                  "the engine's step budget (engine.max_num_batched_tokens {}, "
                  "engine.max_num_seqs {}) exceeds the model runner's ({}, {}); build both from "
                  "one config",
                  config.scheduler.max_num_batched_tokens, config.scheduler.max_num_seqs,
                  limits.max_num_batched_tokens, limits.max_num_seqs);
  if (speculative_.enabled()) {
    // vLLM's defaults: 5 and 5, or the one given for both.
    const int64_t lookup_max = speculative_.prompt_lookup_max > 0   ? speculative_.prompt_lookup_max
                               : speculative_.prompt_lookup_min > 0 ? speculative_.prompt_lookup_min
                                                                    : 5;
    const int64_t lookup_min =
        speculative_.prompt_lookup_min > 0 ? speculative_.prompt_lookup_min : lookup_max;
    ngram_ = NgramSettings{lookup_min, lookup_max, speculative_.num_speculative_tokens};
    validate_ngram_settings(ngram_);
    TESSERA_REQUIRE(runner.config().logits_rows_per_sequence >= 1 + ngram_.proposed,
                    "engine.speculative_config.num_speculative_tokens {} needs the model runner "
                    "to score {} logits rows per sequence, it scores {}; build both from one "
                    "config",
                    ngram_.proposed, 1 + ngram_.proposed, runner.config().logits_rows_per_sequence);
  }
  const int64_t capacity = blocks_.num_blocks() * blocks_.block_size();
  TESSERA_REQUIRE(capacity >= max_model_len_,
                  "the KV cache holds {} tokens ({} blocks of {}), less than one sequence of "
                  "max_model_len = {}; raise engine.num_kv_blocks (or "
                  "engine.gpu_memory_utilization) or lower engine.max_model_len",
                  capacity, blocks_.num_blocks(), blocks_.block_size(), max_model_len_);
  publish_gauges();
}

void LLMEngine::validate_request(const std::vector<int32_t>& prompt_ids,
                                 const SamplingParams& params, int64_t priority) const {
  const int64_t vocab = runner_.model().config().vocab_size;
  params.validate(vocab);
  TESSERA_REQUIRE(!params.grammar || params.grammar->vocabulary().logits_width() == vocab,
                  "structured output: the grammar was compiled for {} logits, this model has {}",
                  params.grammar ? params.grammar->vocabulary().logits_width() : 0, vocab);
  TESSERA_REQUIRE(priority == 0 || scheduler_.config().policy == SchedulingPolicy::priority,
                  "priority: got priority {}, but this server schedules first come, first served; "
                  "start it with --scheduling-policy priority to use request priorities",
                  priority);
  TESSERA_REQUIRE(!prompt_ids.empty(), "prompt: the prompt is empty (no tokens)");
  for (int32_t token : prompt_ids)
    TESSERA_REQUIRE(token >= 0 && token < vocab,
                    "prompt: token id {} is outside the vocabulary 0..{}", token, vocab - 1);
  const int64_t prompt_length = static_cast<int64_t>(prompt_ids.size());
  TESSERA_REQUIRE(prompt_length < max_model_len_,
                  "prompt: the prompt has {} tokens; this model's maximum context length is {} "
                  "tokens, and at least one must be left to generate",
                  prompt_length, max_model_len_);
  TESSERA_REQUIRE(params.max_tokens <= max_model_len_ - prompt_length,
                  "max_tokens: this model's maximum context length is {} tokens; {} prompt tokens "
                  "plus max_tokens = {} exceed it (at most {} can be generated)",
                  max_model_len_, prompt_length, params.max_tokens, max_model_len_ - prompt_length);
}

std::shared_ptr<OutputStream> LLMEngine::add_request(const std::string& id,
                                                     std::vector<int32_t> prompt_ids,
                                                     const SamplingParams& params,
                                                     std::shared_ptr<OutputStream> stream,
                                                     int64_t priority) {
  validate_request(prompt_ids, params, priority);
  TESSERA_REQUIRE(!id.empty() && requests_.count(id) == 0, "request id '{}' is {}", id,
                  id.empty() ? "empty" : "already in use");
  const int64_t prompt_length = static_cast<int64_t>(prompt_ids.size());
  auto request = std::make_unique<Request>();
  request->id = id;
  request->sequence = next_sequence_++;
  request->prompt_ids = std::move(prompt_ids);
  request->all_ids = request->prompt_ids;
  request->params = params;
  request->priority = priority;
  request->seed = params.seed ? *params.seed : mix64(seed_ ^ mix64(requests_added_));
  ++requests_added_;
  if (!params.ignore_eos) request->stop_ids = tokenizer_.eos_ids();
  request->stop_ids.insert(request->stop_ids.end(), params.stop_token_ids.begin(),
                           params.stop_token_ids.end());
  request->max_total_tokens = prompt_length + params.max_tokens;
  request->text = std::make_unique<TextStream>(tokenizer_, request->prompt_ids, params.stop,
                                               params.skip_special_tokens);
  if (params.grammar) request->matcher.emplace(params.grammar);
  request->stream = stream ? std::move(stream) : std::make_shared<OutputStream>();
  Request* raw = request.get();
  requests_[id] = std::move(request);
  by_sequence_[raw->sequence] = raw;
  scheduler_.add(raw);
  publish_gauges();
  return raw->stream;
}

void LLMEngine::abort(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  RequestOutput output;
  finish(*it->second, output, FinishReason::abort);
  publish_gauges();
}

std::vector<std::string> LLMEngine::unfinished_ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, request] : requests_) ids.push_back(id);
  return ids;
}

void LLMEngine::fail_all(const std::string& message) {
  // A step in flight is dropped with its requests: its tokens are not collected (after a device
  // fault, collecting would only throw again; dropping waits for its copies and ignores errors).
  in_flight_.reset();
  for (const std::string& id : unfinished_ids()) {
    RequestOutput output;
    output.error = message;
    finish(*requests_.at(id), output, FinishReason::error);
  }
  publish_gauges();
}

void LLMEngine::finish(Request& request, RequestOutput& output, FinishReason reason) {
  scheduler_.remove(&request);
  output.request_id = request.id;
  output.finish_reason = reason;
  output.prompt_tokens = static_cast<int64_t>(request.prompt_ids.size());
  output.completion_tokens = static_cast<int64_t>(request.output_ids.size());
  output.cached_tokens = request.num_cached_tokens;
  auto now = Clock::now();
  metrics_.update([&](EngineMetrics& m) {
    ++m.finished_requests[finish_reason_name(reason)];
    if (reason == FinishReason::stop || reason == FinishReason::length)
      m.end_to_end_latency.observe(seconds_between(request.arrival, now));
  });
  request.stream->push(output);
  const std::string id = request.id;
  by_sequence_.erase(request.sequence);
  requests_.erase(id);  // `request` is gone from here on
}

namespace {

// Moves the logprobs of the tokens whose text `piece` shows into `output`; tokens pushed before
// them that were not shown added no text and are dropped.
void release_logprobs(Request& request, const TextStream::Piece& piece, RequestOutput& output) {
  if (!request.params.logprobs) return;
  for (const TextStream::ShownToken& shown : piece.shown) {
    while (!request.unshown_logprobs.empty() &&
           request.unshown_logprobs.front().first < shown.push_number)
      request.unshown_logprobs.pop_front();
    TESSERA_CHECK(!request.unshown_logprobs.empty(), "request {}: logprobs of token {} missing",
                  request.id, shown.push_number);
    output.logprobs.push_back(
        {std::move(request.unshown_logprobs.front().second), shown.text_offset, shown.text});
    request.unshown_logprobs.pop_front();
  }
}

// The end of the text: what was held back, and its tokens' logprobs.
void finish_text(Request& request, RequestOutput& output) {
  const TextStream::Piece piece = request.text->finish();
  output.text += piece.text;
  release_logprobs(request, piece, output);
  request.unshown_logprobs.clear();
}

}  // namespace

void LLMEngine::append_token(Request& request, const SampledToken& token, RequestOutput& output) {
  const auto now = Clock::now();
  metrics_.update([&](EngineMetrics& m) {
    ++m.generation_tokens;
    if (!request.first_token_time)
      m.time_to_first_token.observe(seconds_between(request.arrival, now));
    else
      m.inter_token_latency.observe(seconds_between(request.last_token_time, now));
  });
  if (!request.first_token_time) request.first_token_time = now;
  request.last_token_time = now;
  request.output_ids.push_back(token.id);
  request.all_ids.push_back(token.id);
  output.token_ids.push_back(token.id);
  const SamplingParams& p = request.params;
  if (std::find(request.stop_ids.begin(), request.stop_ids.end(), token.id) !=
      request.stop_ids.end()) {
    output.stop_reason = std::to_string(token.id);
    finish_text(request, output);  // the end token's own text is not shown
    output.finish_reason = FinishReason::stop;
    return;
  }
  // The mask allowed only tokens the grammar takes; one it does not is an engine fault.
  TESSERA_CHECK(!request.matcher || request.matcher->accept(token.id),
                "request {}: token {} does not fit its grammar", request.id, token.id);
  if (p.logprobs) request.unshown_logprobs.emplace_back(request.text->pushes(), token);
  const TextStream::Piece piece = request.text->push(token.id);
  output.text += piece.text;
  release_logprobs(request, piece, output);
  if (request.matcher && request.matcher->terminated()) {  // nothing more may follow
    finish_text(request, output);
    output.finish_reason = FinishReason::stop;
    return;
  }
  if (piece.stopped) {
    request.unshown_logprobs.clear();
    output.stop_reason = piece.stop_string;
    output.finish_reason = FinishReason::stop;
    return;
  }
  if (static_cast<int64_t>(request.output_ids.size()) >= p.max_tokens ||
      request.num_tokens() >= max_model_len_) {
    finish_text(request, output);
    output.finish_reason = FinishReason::length;
  }
}

std::vector<RequestOutput> LLMEngine::step() {
  std::vector<RequestOutput> outputs;
  // Penalties count the output so far: its tokens must be on the host before the next draw.
  // So does a proposal: it is made from every token so far.
  if (in_flight_ && (in_flight_->needs_host_tokens || speculative_.enabled())) {
    collect(*in_flight_, outputs);
    in_flight_.reset();
  }
  if (speculative_.enabled()) propose();
  SchedulerOutput scheduled = scheduler_.schedule();
  if (!scheduled.preempted.empty())
    metrics_.update([&](EngineMetrics& m) {
      m.preemptions += static_cast<int64_t>(scheduled.preempted.size());
    });
  std::optional<InFlightStep> previous = std::move(in_flight_);
  in_flight_.reset();
  if (!scheduled.empty()) launch(scheduled, previous, outputs);
  if (previous && !previous->collected) collect(*previous, outputs);
  if (in_flight_ && !scheduler_.config().async_scheduling) {
    collect(*in_flight_, outputs);
    in_flight_.reset();
  }
  publish_gauges();
  return outputs;
}

void LLMEngine::propose() {
  const bool large_batch =
      speculative_.disable_by_batch_size > 0 &&
      static_cast<int64_t>(scheduler_.num_running()) > speculative_.disable_by_batch_size;
  for (auto& [id, request] : requests_) {
    Request& r = *request;
    r.proposal.clear();
    // Only a request whose next step is one decode token, with every token on the host.
    if (large_batch || r.status != RequestStatus::running || r.matcher ||
        r.num_pending_tokens > 0 || r.num_computed_tokens + 1 != r.num_tokens())
      continue;
    // Room for the proposal and the token drawn after it.
    const int64_t room = std::min(r.max_total_tokens, max_model_len_) - r.num_tokens() - 1;
    if (room <= 0) continue;
    r.proposal = propose_ngram(r.all_ids, ngram_);
    if (static_cast<int64_t>(r.proposal.size()) > room)
      r.proposal.resize(static_cast<size_t>(room));
  }
}

void LLMEngine::launch(const SchedulerOutput& scheduled, std::optional<InFlightStep>& previous,
                       std::vector<RequestOutput>& outputs) {
  static const int32_t placeholder = 0;  // a token the runner takes from the draws instead
  std::vector<Request*> requests;
  std::vector<SequenceInput> batch;
  batch.reserve(scheduled.scheduled.size());
  // A verifying request's new token and its proposal, contiguous (kept until the step launched).
  std::vector<std::vector<int32_t>> verified_inputs;
  verified_inputs.reserve(scheduled.scheduled.size());
  for (const ScheduledRequest& item : scheduled.scheduled) {
    Request& r = *item.request;
    requests.push_back(&r);
    if (!r.proposal.empty()) {
      TESSERA_CHECK(r.num_pending_tokens == 0 && r.num_computed_tokens + 1 == r.num_tokens() &&
                        item.num_new_tokens == 1 + static_cast<int64_t>(r.proposal.size()),
                    "request {}: a proposal of {} scheduled with {} new token(s)", r.id,
                    r.proposal.size(), item.num_new_tokens);
      std::vector<int32_t>& tokens = verified_inputs.emplace_back();
      tokens.push_back(r.all_ids.back());
      tokens.insert(tokens.end(), r.proposal.begin(), r.proposal.end());
      SequenceInput input{tokens, r.num_computed_tokens, blocks_.block_table(r.sequence)};
      input.logits_rows = static_cast<int32_t>(tokens.size());
      batch.push_back(input);
      continue;
    }
    if (r.num_pending_tokens > 0) {
      // Its one new token is the draw of the step in flight.
      TESSERA_CHECK(previous && item.num_new_tokens == 1 && r.num_pending_tokens == 1 &&
                        r.num_computed_tokens == r.num_tokens(),
                    "request {}: {} token(s) in flight, {} scheduled", r.id, r.num_pending_tokens,
                    item.num_new_tokens);
      batch.push_back(SequenceInput{std::span<const int32_t>(&placeholder, 1),
                                    r.num_computed_tokens, blocks_.block_table(r.sequence),
                                    r.pending_row});
      continue;
    }
    batch.push_back(SequenceInput{
        std::span<const int32_t>(r.all_ids).subspan(static_cast<size_t>(r.num_computed_tokens),
                                                    static_cast<size_t>(item.num_new_tokens)),
        r.num_computed_tokens, blocks_.block_table(r.sequence)});
  }
  // Who draws a token this step: a request whose scheduled tokens reach its end.
  std::vector<bool> draws;
  std::vector<int32_t> last_rows;  // each request's last logits row
  bool constrained = false;
  int32_t logits_rows = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = *requests[i];
    draws.push_back(r.num_computed_tokens + scheduled.scheduled[i].num_new_tokens ==
                    r.num_tokens_with_pending() + static_cast<int64_t>(r.proposal.size()));
    constrained |= draws.back() && r.matcher.has_value();
    logits_rows += batch[i].logits_rows;
    last_rows.push_back(logits_rows - 1);
  }
  // Row j of a verification draws output token output_index + j, the proposal's first j tokens
  // counted as output before it (penalties).
  std::vector<std::vector<int32_t>> proposed_outputs;
  proposed_outputs.reserve(verified_inputs.size());
  // Rows of prefill chunks that do not end their prompt: drawn greedily on the device, ignored.
  static const SamplingParams plain_greedy = [] {
    SamplingParams p;
    p.temperature = 0;
    return p;
  }();
  auto sampling_rows = [&] {
    std::vector<SamplingRow> rows;
    for (size_t i = 0; i < requests.size(); ++i) {
      const Request* r = requests[i];
      if (!r || !draws[i]) {
        rows.insert(rows.end(), static_cast<size_t>(batch[i].logits_rows),
                    SamplingRow{&plain_greedy, 0, 0, {}, {}});
        continue;
      }
      const int64_t output_index =
          r->num_tokens_with_pending() - static_cast<int64_t>(r->prompt_ids.size());
      rows.push_back(SamplingRow{&r->params, r->seed, output_index, r->prompt_ids, r->output_ids});
      if (r->proposal.empty()) continue;
      std::vector<int32_t>& output = proposed_outputs.emplace_back(r->output_ids);
      output.reserve(output.size() + r->proposal.size());
      for (size_t j = 0; j < r->proposal.size(); ++j) {
        output.push_back(r->proposal[j]);
        rows.push_back(SamplingRow{&r->params, r->seed, output_index + 1 + static_cast<int64_t>(j),
                                   r->prompt_ids, std::span<const int32_t>(output)});
      }
    }
    return rows;
  };
  InFlightStep step;
  try {
    const Tensor previous_ids = previous ? previous->draws.device_ids() : Tensor();
    if (!constrained) {
      step.draws = execute_and_sample(runner_, batch, previous_ids, sampling_rows());
    } else {
      const Tensor logits = runner_.execute(batch, previous_ids);
      // While the device computes the forward, the step before hands its tokens over (the
      // grammars advance) and the masks are made. `previous` stays alive: its ids are inputs of
      // the forward in flight.
      if (previous) {
        std::vector<SequenceId> sequences;
        for (const Request* r : requests) sequences.push_back(r->sequence);
        collect(*previous, outputs);
        for (size_t i = 0; i < requests.size(); ++i) {
          auto found = by_sequence_.find(sequences[i]);  // it may have finished meanwhile
          requests[i] = found == by_sequence_.end() ? nullptr : found->second;
          if (!requests[i]) draws[i] = false;
        }
      }
      const TokenMasks masks = grammar_masks(requests, draws, last_rows, outputs);
      step.draws = launch_sampling(logits, sampling_rows(), &masks);
    }
  } catch (const std::exception& error) {
    // The batch's requests fail; the engine and every other request go on.
    spdlog::error("a step of {} request(s) failed: {}", batch.size(), error.what());
    for (Request* r : requests) {
      if (!r || !by_sequence_.count(r->sequence)) continue;
      RequestOutput output;
      output.error = error.what();
      finish(*r, output, FinishReason::error);
      outputs.push_back(std::move(output));
    }
    return;
  }
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i]) {
      step.rows.resize(step.rows.size() + static_cast<size_t>(batch[i].logits_rows));
      continue;
    }
    const ScheduledRequest& item = scheduled.scheduled[i];
    Request& r = *requests[i];
    const int64_t prompt_length = static_cast<int64_t>(r.prompt_ids.size());
    prompt_tokens +=
        std::max<int64_t>(0, std::min(prompt_length, r.num_computed_tokens + item.num_new_tokens) -
                                 std::max(r.num_computed_tokens, r.num_cached_tokens));
    r.num_computed_tokens += item.num_new_tokens;
    if (!r.proposal.empty()) {
      // Its rows are drawn and checked together when collected; its blocks are cached then.
      step.verifications.push_back({r.sequence, step.rows.size(), std::move(r.proposal)});
      r.proposal.clear();
      step.rows.resize(step.rows.size() + step.verifications.back().proposal.size() + 1);
      ++r.num_pending_tokens;
      step.needs_host_tokens = true;
      continue;
    }
    blocks_.cache_blocks(r.sequence, r.all_ids, r.num_computed_tokens);
    if (draws[i]) {
      r.pending_row = static_cast<int32_t>(step.rows.size());
      ++r.num_pending_tokens;
      step.rows.emplace_back(r.sequence);
      step.needs_host_tokens |= r.params.has_penalties();
    } else {
      step.rows.emplace_back(std::nullopt);
    }
  }
  metrics_.update([&](EngineMetrics& m) { m.prompt_tokens += prompt_tokens; });
  in_flight_ = std::move(step);
}

TokenMasks LLMEngine::grammar_masks(std::vector<Request*>& requests, const std::vector<bool>& draws,
                                    std::span<const int32_t> last_rows,
                                    std::vector<RequestOutput>& outputs) {
  TokenMasks masks;
  // The requests whose mask was made, one per distinct mask: another in the same grammar state
  // (and with the same end tokens) shares it.
  std::vector<const Request*> made;
  for (size_t i = 0; i < requests.size(); ++i) {
    Request* r = requests[i];
    if (!r || !draws[i] || !r->matcher) continue;
    const GrammarMatcher& matcher = *r->matcher;
    auto same = std::find_if(made.begin(), made.end(), [&](const Request* other) {
      return other->matcher->grammar() == matcher.grammar() &&
             other->matcher->state() == matcher.state() && other->stop_ids == r->stop_ids;
    });
    if (same != made.end()) {
      masks.rows.push_back(last_rows[i]);
      masks.mask_of_row.push_back(static_cast<int32_t>(same - made.begin()));
      continue;
    }
    const int64_t width = r->params.grammar->vocabulary().mask_words();
    TESSERA_CHECK(masks.words_per_row == 0 || masks.words_per_row == width,
                  "token masks of {} and {} words", masks.words_per_row, width);
    masks.words_per_row = width;
    const size_t offset = masks.words.size();
    masks.words.resize(offset + static_cast<size_t>(width));
    try {
      const auto start = Clock::now();
      matcher.fill_mask(std::span(masks.words).subspan(offset), r->stop_ids);
      const double seconds = seconds_between(start, Clock::now());
      metrics_.update([&](EngineMetrics& m) { m.grammar_mask_time.observe(seconds); });
    } catch (const Error& error) {
      // This request's grammar passed a limit: it ends with the error; the batch goes on.
      masks.words.resize(offset);
      RequestOutput output;
      output.error = error.what();
      finish(*r, output, FinishReason::error);
      outputs.push_back(std::move(output));
      requests[i] = nullptr;
      continue;
    }
    masks.rows.push_back(last_rows[i]);
    masks.mask_of_row.push_back(static_cast<int32_t>(made.size()));
    made.push_back(r);
  }
  return masks;
}

void LLMEngine::collect(InFlightStep& step, std::vector<RequestOutput>& outputs) {
  step.collected = true;
  std::vector<SampledToken> tokens = step.draws.wait();
  for (size_t i = 0; i < step.rows.size(); ++i) {
    if (!step.rows[i]) continue;
    const SequenceId sequence = *step.rows[i];
    // A request that finished (stopped, aborted, failed) since the launch is gone: its row is
    // dropped. Sequences are never reused, so the pointer is followed only when still alive.
    auto found = by_sequence_.find(sequence);
    if (found == by_sequence_.end()) continue;
    Request& r = *found->second;
    --r.num_pending_tokens;
    RequestOutput output;
    output.request_id = r.id;
    append_token(r, tokens[i], output);
    deliver(r, output, outputs);
  }
  for (const Verification& verification : step.verifications)
    accept_verified(verification, tokens, outputs);
}

void LLMEngine::accept_verified(const Verification& verification,
                                std::span<const SampledToken> tokens,
                                std::vector<RequestOutput>& outputs) {
  auto found = by_sequence_.find(verification.sequence);
  if (found == by_sequence_.end()) return;
  Request& r = *found->second;
  --r.num_pending_tokens;
  const std::span<const SampledToken> drawn =
      tokens.subspan(verification.first_row, verification.proposal.size() + 1);
  size_t accepted = 0;
  while (accepted < verification.proposal.size() &&
         drawn[accepted].id == verification.proposal[accepted])
    ++accepted;
  // The KV of rejected proposals is stale: the computed tokens end after the last accepted one,
  // the next step overwrites the slots after it, and blocks past the tokens go back.
  r.num_computed_tokens -= static_cast<int64_t>(verification.proposal.size() - accepted);
  blocks_.trim(r.sequence, r.num_tokens() + static_cast<int64_t>(accepted) + 1);
  metrics_.update([&](EngineMetrics& m) {
    ++m.spec_decode_drafts;
    m.spec_decode_draft_tokens += static_cast<int64_t>(verification.proposal.size());
    m.spec_decode_accepted_tokens += static_cast<int64_t>(accepted);
  });
  RequestOutput output;
  output.request_id = r.id;
  for (size_t j = 0; j <= accepted && !output.finished(); ++j) append_token(r, drawn[j], output);
  deliver(r, output, outputs);
}

void LLMEngine::deliver(Request& r, RequestOutput& output, std::vector<RequestOutput>& outputs) {
  if (r.status == RequestStatus::running)
    blocks_.cache_blocks(r.sequence, r.all_ids, r.num_computed_tokens);
  output.prompt_tokens = static_cast<int64_t>(r.prompt_ids.size());
  output.completion_tokens = static_cast<int64_t>(r.output_ids.size());
  output.cached_tokens = r.num_cached_tokens;
  if (output.finished()) {
    FinishReason reason = output.finish_reason;
    output.finish_reason = FinishReason::none;  // finish() sets it and pushes
    RequestOutput final_output = output;
    finish(r, final_output, reason);
    outputs.push_back(std::move(final_output));
  } else {
    r.stream->push(output);
    outputs.push_back(std::move(output));
  }
}

void LLMEngine::publish_gauges() {
  metrics_.update([&](EngineMetrics& m) {
    m.requests_running = static_cast<int64_t>(scheduler_.num_running());
    m.requests_waiting = static_cast<int64_t>(scheduler_.num_waiting());
    m.kv_cache_usage = blocks_.usage();
    m.prefix_cache_queries = blocks_.prefix_query_tokens();
    m.prefix_cache_hits = blocks_.prefix_hit_tokens();
  });
}

}  // namespace tessera
