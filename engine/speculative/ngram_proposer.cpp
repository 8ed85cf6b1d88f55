#include "engine/speculative/ngram_proposer.h"

#include <algorithm>

#include "runtime/check.h"

namespace tessera {

void validate_ngram_settings(const NgramSettings& settings) {
  TESSERA_REQUIRE(settings.min_n >= 1,
                  "speculative_config: prompt_lookup_min must be at least 1, "
                  "got {}",
                  settings.min_n);
  TESSERA_REQUIRE(settings.max_n >= settings.min_n,
                  "speculative_config: prompt_lookup_max ({}) must be at least prompt_lookup_min "
                  "({})",
                  settings.max_n, settings.min_n);
  TESSERA_REQUIRE(settings.proposed >= 1,
                  "speculative_config: num_speculative_tokens must be at least 1, got {}",
                  settings.proposed);
}

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, const NgramSettings& settings) {
  const auto length = static_cast<int64_t>(tokens.size());
  // The longest n first: a longer match is likelier to continue the same way.
  for (int64_t n = std::min(settings.max_n, length - 1); n >= settings.min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(length - n));
    // The latest earlier occurrence: starts from length - n - 1 down, so that at least one token
    // follows it.
    for (int64_t start = length - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t first = start + n;
      const int64_t count = std::min(settings.proposed, length - first);
      return {tokens.begin() + first, tokens.begin() + first + count};
    }
  }
  return {};
}

}  // namespace tessera
