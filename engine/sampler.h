// Picks each sequence's next token from the runner's logits, on the device that holds them, with
// vLLM's sampling semantics (the "sample_tokens" kernel, kernels/sampling.h): penalties, then
// temperature, then the min-p and top-k cuts, then top-p over what is left; the draw is the
// Gumbel-max trick with noise from a counter-based hash of (seed, output index, token), so a
// seeded sequence draws the same tokens whatever else is in the batch, and a preempted sequence
// that is recomputed draws them again. Logprobs are those of the model's own distribution (before
// penalties and temperature), computed only for rows that ask for them. Only token ids (and
// asked-for logprobs) cross to the host.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/runner/model_executor.h"
#include "engine/sampling_params.h"
#include "runtime/backend/backend.h"
#include "runtime/tensor.h"

namespace tessera {

// One sequence's sampling in one step.
struct SamplingRow {
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;                    // the sequence's resolved seed
  int64_t output_index = 0;             // which output token is drawn (the noise's counter)
  std::span<const int32_t> prompt_ids;  // for the repetition penalty
  std::span<const int32_t> output_ids;  // for every penalty
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};

struct SampledToken {
  int32_t id = 0;
  float logprob = 0;              // set when the row's params ask for logprobs
  std::vector<TokenLogprob> top;  // the params' logprobs count of most likely tokens
};

// The rows of a batch whose tokens a grammar constrains (structured output): for each, its logits
// row and which of the step's distinct masks applies there (rows in the same grammar state share
// one: a mask is bit t % 32 of word t / 32 for each token t allowed).
struct TokenMasks {
  std::vector<int32_t> rows;
  std::vector<int32_t> mask_of_row;  // per entry of rows: an index into the masks
  std::vector<uint32_t> words;       // the distinct masks, words_per_row words each
  int64_t words_per_row = 0;
  bool empty() const { return rows.empty(); }
  int64_t num_masks() const {
    return words_per_row == 0 ? 0 : static_cast<int64_t>(words.size()) / words_per_row;
  }
};

// A step's draws on their way to the host. The ids stay on the device, where the next step may
// take them as its input before the host has them (the engine's asynchronous scheduling), while
// their copy to the host (and the asked-for logprobs') is in flight.
class SampledBatch {
 public:
  SampledBatch() = default;
  SampledBatch(SampledBatch&&) noexcept = default;
  SampledBatch& operator=(SampledBatch&&) noexcept = default;
  ~SampledBatch();

  // The draws [rows] (i32 or i64) on the logits' device.
  const Tensor& device_ids() const { return ids_; }
  int64_t size() const { return static_cast<int64_t>(asked_logprobs_.size()); }
  // Blocks until the ids (and asked-for logprobs) are on the host; once.
  std::vector<SampledToken> wait();

 private:
  friend SampledBatch launch_sampling(const Tensor& logits, std::span<const SamplingRow> rows,
                                      const TokenMasks* masks);
  friend SampledBatch greedy_draws(const Tensor& ids);
  Tensor ids_, logprobs_, top_ids_;  // on the device until their copies land
  std::unique_ptr<HostReadback> ids_copy_, logprobs_copy_, top_ids_copy_;
  std::vector<int64_t> asked_logprobs_;  // per row: top logprobs asked for, -1 for none
  int64_t width_ = 1;                    // top_ids_' columns
  int64_t vocab_ = 0;
};

// Draws one token per row of logits [rows.size(), vocab] (f32, any device) on that device and
// starts their copy to the host; returns without waiting for it. When every row is plain greedy
// (no penalties, no logprobs, no grammar) one argmax launch does it. `masks`, when given, first
// sets the logits of tokens their grammars forbid to -inf, in place ("apply_token_mask"). `rows`
// and `masks` are read before it returns.
SampledBatch launch_sampling(const Tensor& logits, std::span<const SamplingRow> rows,
                             const TokenMasks* masks = nullptr);
// Each row's first maximum [rows] (i64) on the logits' device: what a plain-greedy row draws. One
// argmax launch, named "sampling" in a profile.
Tensor greedy_ids(const Tensor& logits);
// Whether every row is plain greedy (no penalties, no logprobs, no grammar): each draw is then its
// row's argmax, which a runner may take with its forward (ModelExecutor::execute_greedy).
bool all_plain_greedy(std::span<const SamplingRow> rows);
// The draws of plain-greedy rows whose ids [rows] (i32 or i64) the device already holds:
// starts their copy to the host.
SampledBatch greedy_draws(const Tensor& ids);
// One step: the forward of `batch` and the draws of `rows` (one per sequence), through the
// runner's greedy pick when every row is plain greedy (execute_greedy), else its logits and
// launch_sampling.
SampledBatch execute_and_sample(ModelExecutor& runner, std::span<const SequenceInput> batch,
                                const Tensor& sampled_ids, std::span<const SamplingRow> rows);
// launch_sampling(...).wait(): one token per row.
std::vector<SampledToken> sample_tokens(const Tensor& logits, std::span<const SamplingRow> rows);
// One row of host logits.
SampledToken sample_row(std::span<const float> logits, const SamplingRow& row);

// Asynchronous scheduling's hand-over on the device: `into` (i32, may be `token_ids` itself) gets
// `token_ids` (i32, a step's inputs) with every entry -1 - r replaced by row r of `sampled_ids`
// (SampledBatch::device_ids of the step before); one launch ("take_sampled_ids",
// kernels/sampling.h).
void take_sampled_ids(const Tensor& token_ids, const Tensor& sampled_ids, Tensor& into);

}  // namespace tessera
