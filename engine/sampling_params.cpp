#include "engine/sampling_params.h"

#include <cmath>

#include "runtime/check.h"

namespace tessera {

void SamplingParams::validate(int64_t vocab_size) const {
  TESSERA_REQUIRE(n >= 1 && n <= 128, "n must be in 1..128, got {}", n);
  TESSERA_REQUIRE(std::isfinite(temperature) && temperature >= 0 && temperature <= 100,
                  "temperature must be in [0, 100] (0 is greedy), got {}", temperature);
  TESSERA_REQUIRE(top_k >= -1, "top_k must be >= 1, or 0 or -1 to turn it off, got {}", top_k);
  TESSERA_REQUIRE(top_p > 0 && top_p <= 1, "top_p must be in (0, 1], got {}", top_p);
  TESSERA_REQUIRE(min_p >= 0 && min_p <= 1, "min_p must be in [0, 1], got {}", min_p);
  TESSERA_REQUIRE(
      std::isfinite(repetition_penalty) && repetition_penalty > 0 && repetition_penalty <= 100,
      "repetition_penalty must be in (0, 100] (1 is off), got {}", repetition_penalty);
  TESSERA_REQUIRE(std::isfinite(presence_penalty) && std::abs(presence_penalty) <= 2,
                  "presence_penalty must be in [-2, 2], got {}", presence_penalty);
  TESSERA_REQUIRE(std::isfinite(frequency_penalty) && std::abs(frequency_penalty) <= 2,
                  "frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  TESSERA_REQUIRE(max_tokens >= 1, "max_tokens must be >= 1, got {}", max_tokens);
  TESSERA_REQUIRE(stop.size() <= max_stop_strings, "stop holds {} strings; at most {} are allowed",
                  stop.size(), max_stop_strings);
  for (const std::string& text : stop)
    TESSERA_REQUIRE(!text.empty() && text.size() <= max_stop_string_bytes,
                    "stop strings must hold 1..{} bytes, got one of {}", max_stop_string_bytes,
                    text.size());
  for (int32_t id : stop_token_ids)
    TESSERA_REQUIRE(id >= 0 && (vocab_size <= 0 || id < vocab_size),
                    "stop_token_ids holds {}, outside the vocabulary 0..{}", id, vocab_size - 1);
  if (logprobs)
    TESSERA_REQUIRE(*logprobs >= 0 && *logprobs <= max_logprobs,
                    "logprobs must be in 0..{}, got {}", max_logprobs, *logprobs);
}

}  // namespace tessera
