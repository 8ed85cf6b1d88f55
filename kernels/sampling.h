// The "sample_tokens" kernel: one token per row of logits, with vLLM's sampling semantics, on the
// device that computed the logits (the CPU kernel in cpu/sampling.cpp, the GPU one in
// cuda/sampling.cu; engine/sampler.cpp prepares the inputs and reads the outputs). Per row:
//   1. penalties on the logits: repetition (tokens of the prompt or the output: a positive logit
//      is divided by it, a negative one multiplied), then presence and frequency (tokens of the
//      output: minus presence + frequency * count);
//   2. temperature 0: the first maximum. Otherwise the logits times 1/temperature (in f32), then
//      a threshold: min-p (max + log(min_p)), top-k (the k-th largest value), then top-p over the
//      tokens above it (the largest value whose tokens at or above it hold top_p of their mass);
//      ties at a threshold stay in;
//   3. the draw: the kept token with the largest z + Gumbel noise (f32), the noise from
//      sampling_gumbel(sampling_row_key(seed, output_index), token), so a draw depends on nothing
//      but the row. The devices' logf may differ in the last bit, so two candidates whose keys
//      are that close may be ordered differently on the CPU and the GPU; nothing else differs;
//   4. logprobs (when num_logprobs >= 0): the chosen token's and the num_logprobs most likely
//      tokens', from the raw logits' log-softmax.
//
// inputs:  0 logits [R, V] f32
//          1 row_params [R, 8] f32: temperature, top_p, min_p, top_k (0: off), repetition_penalty,
//            presence_penalty, frequency_penalty, num_logprobs (-1: none)
//          2 row_seeds [R, 2] i64: seed (its bits), output_index
//          3 penalty_offsets [R + 1] i32: row r's penalty entries are rows [offsets[r],
//            offsets[r + 1]) of input 4
//          4 penalty_entries [max(P, 1), 3] i32: token, count in the output, 1 when in the prompt
// outputs: 0 token_ids [R] i32
//          1 logprobs [R, 1 + N] f32: the chosen token's, then the top N's (N = top_ids' width)
//          2 top_ids [R, N] i32 (N >= 1)
//          3 scratch [R, V] f32: working space
//
// The "take_sampled_ids" kernel feeds a step's sampled ids, still on the device, to the next
// step's input (asynchronous scheduling, engine/llm_engine.h):
// inputs:  0 sampled_ids [S] i32 or i64: the previous step's draws, one per row
//          1 token_ids [T] i32: the step's ids, an entry -1 - r (negative) for sampled_ids[r]
// outputs: 0 [T] i32 (may be token_ids itself): token_ids with each entry -1 - r replaced by
//            sampled_ids[r]; an r outside 0..S-1 gives 0 (the host checks rows before; no read
//            outside the buffer either way). A decode graph writes it straight into the forward's
//            input, so the hand-over costs no copy of its own.
//
// The "apply_token_mask" kernel (structured output, engine/structured_output/): in place, the
// logits of the tokens a row's grammar forbids become -inf, before "sample_tokens" draws.
// inputs:  0 masks [U, W] i32: bit t % 32 of word t / 32 is set when token t is allowed
//          1 rows [2, C] i32: row 0 the logits rows masked (others are left alone), row 1 the mask
//            (0..U-1) each takes: rows in the same grammar state share one
// outputs: 0 logits [R, V] f32, contiguous, V <= 32 * W (changed in place)
//
// The "greedy_pick" kernel (GPU only) is argmax's for a decode graph's greedy step
// (engine/runner/decode_graphs.h): the first maximum of each row, NaN counting as the maximum, as
// the argmax op gives it. Outside a capture argmax splits few long rows over the SMs with scratch
// of its own; this kernel takes the scratch from the caller, so a graph may hold the split too.
// inputs:  0 logits [R, V] f32, bf16 or f16, contiguous
// outputs: 0 ids [R] i64
//          1 workspace [kGreedyPickWorkspaceWords * R] i64: the partial results of each row's
//            chunks (read only by the same launch)
#pragma once

#include <cmath>
#include <cstdint>

#include "runtime/host_device.h"
#include "runtime/mix64.h"

namespace tessera {

// greedy_pick's workspace per row, in i64 words: room for kGreedyPickWorkspaceWords / 2 chunks
// (a value and an index each).
inline constexpr int64_t kGreedyPickWorkspaceWords = 128;

enum SamplingParam {
  kTemperature = 0,
  kTopP,
  kMinP,
  kTopK,
  kRepetitionPenalty,
  kPresencePenalty,
  kFrequencyPenalty,
  kNumLogprobs,
  kNumSamplingParams
};

// take_sampled_ids for one entry: a token id as it is, an entry -1 - r as sampled[r] (0 when r is
// outside the `count` draws).
template <typename Id>
TESSERA_HOST_DEVICE inline int32_t take_sampled_id(int32_t token, const Id* sampled,
                                                   int64_t count) {
  const int64_t row = -1 - int64_t{token};
  return token >= 0 ? token : row < count ? static_cast<int32_t>(sampled[row]) : 0;
}

// One sequence's noise key at one output index: the only 64-bit hashing a draw needs.
TESSERA_HOST_DEVICE inline uint64_t sampling_row_key(uint64_t seed, int64_t output_index) {
  return mix64(seed ^ mix64(static_cast<uint64_t>(output_index) * 0xD1B54A32D192ED03ull));
}

TESSERA_HOST_DEVICE inline uint32_t sampling_hash32(uint32_t x) {  // "lowbias32"
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// The Gumbel noise of `token` under a row key: -log(-log(u)) of a uniform u in (0, 1) hashed from
// the pair with 32-bit arithmetic (cheap on a GPU), in f32 on every device.
TESSERA_HOST_DEVICE inline float sampling_gumbel(uint64_t row_key, int64_t token) {
  uint32_t h = sampling_hash32(static_cast<uint32_t>(token) ^ static_cast<uint32_t>(row_key));
  h = sampling_hash32(h ^ static_cast<uint32_t>(row_key >> 32));
  const float u = (static_cast<float>(h >> 8) + 0.5f) * 0x1.0p-24f;  // never 0 or 1
  return -logf(-logf(u));
}

// A float's position in the order of floats, as an unsigned key (larger float, larger key).
TESSERA_HOST_DEVICE inline uint32_t float_order_key(float value) {
  union {
    float f;
    uint32_t u;
  } bits{value};
  return (bits.u & 0x80000000u) ? ~bits.u : (bits.u | 0x80000000u);
}

// The penalized logit of a token: repetition first, then presence and frequency.
TESSERA_HOST_DEVICE inline float penalized_logit(float logit, int32_t output_count,
                                                 int32_t in_prompt, const float* params) {
  const float repetition = params[kRepetitionPenalty];
  if (repetition != 1.0f && (in_prompt || output_count > 0))
    logit = logit > 0 ? logit / repetition : logit * repetition;
  if (output_count > 0)
    logit -= static_cast<float>(static_cast<double>(params[kFrequencyPenalty]) * output_count +
                                static_cast<double>(params[kPresencePenalty]));
  return logit;
}

}  // namespace tessera
