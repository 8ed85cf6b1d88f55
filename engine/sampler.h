// Picks the next token from a row of logits: greedy at temperature 0, else sampling from the
// softmax at that temperature after top-k, top-p and min-p filtering, from a seeded generator.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>

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
  int32_t sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 generator_;
};

}  // namespace tessera
