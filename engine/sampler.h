// Picks the next token from a row of logits: greedy at temperature 0, else sampling from the
// softmax at that temperature after top-k, top-p and min-p filtering, from a seeded generator.
// Given the runner's device logits it copies only what it needs: greedy takes the argmax on the
// device and copies the id; sampling copies the sequence's row.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "kernels/tensor.h"

namespace tessera {

struct SamplingParams {
  double temperature = 1.0;
  int64_t top_k = 0;   // 0: off
  double top_p = 1.0;  // 1: off
  double min_p = 0.0;  // 0: off
  std::optional<uint64_t> seed;
  int64_t max_tokens = 16;

  // Throws naming the bad field and its valid range.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int32_t sample(std::span<const float> logits);  // one row of host logits
  // Row `row` of logits [rows, vocab] (f32, any device), e.g. what ModelRunner::execute returns.
  int32_t sample(const Tensor& logits, int64_t row);

 private:
  SamplingParams params_;
  std::mt19937_64 generator_;
};

// The greedy pick of every row of logits [rows, vocab] (any device): the first maximum of each row,
// found on the device; only the ids come back to the host.
std::vector<int32_t> greedy_token_ids(const Tensor& logits);

}  // namespace tessera
