// Prompt lookup, vLLM's speculative method "ngram": a request's own tokens (prompt and output so
// far) propose its next ones. The longest suffix of the tokens, from prompt_lookup_max down to
// prompt_lookup_min tokens, that also occurs earlier is looked up; the tokens that followed its
// latest earlier occurrence, up to num_speculative_tokens of them, are the proposal. Repetitive
// text (code being edited, documents quoted back) continues as it did before, and the target model
// verifies the proposal in one forward.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

struct NgramSettings {
  int64_t min_n = 1;     // prompt_lookup_min
  int64_t max_n = 4;     // prompt_lookup_max
  int64_t proposed = 3;  // num_speculative_tokens
};

// Throws naming the field when the settings cannot propose (sizes below 1, min_n above max_n).
void validate_ngram_settings(const NgramSettings& settings);

// The proposal for `tokens` (empty when no suffix of min_n or more tokens occurred before).
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, const NgramSettings& settings);

}  // namespace tessera
