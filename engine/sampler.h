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
#include <span>
#include <vector>

#include "engine/sampling_params.h"
#include "kernels/tensor.h"

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

// One token per row of logits [rows.size(), vocab] (f32, any device), drawn on that device. When
// every row is plain greedy (no penalties, no logprobs) one argmax launch does it.
std::vector<SampledToken> sample_tokens(const Tensor& logits, std::span<const SamplingRow> rows);
// One row of host logits.
SampledToken sample_row(std::span<const float> logits, const SamplingRow& row);

// The greedy pick of every row of logits [rows, vocab] (any device): the first maximum of each row,
// found on the device; only the ids come back to the host.
std::vector<int32_t> greedy_token_ids(const Tensor& logits);

}  // namespace tessera
