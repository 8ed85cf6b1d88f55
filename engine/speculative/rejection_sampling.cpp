#include "engine/speculative/rejection_sampling.h"

#include "runtime/check.h"

namespace tessera {

VerifiedToken verify_one_hot(std::span<const float> probabilities, int32_t proposed,
                             double accept_uniform, double draw_uniform) {
  TESSERA_CHECK(proposed >= 0 && static_cast<size_t>(proposed) < probabilities.size(),
                "proposed token {} outside {} probabilities", proposed, probabilities.size());
  const double p_proposed = probabilities[static_cast<size_t>(proposed)];
  if (accept_uniform < p_proposed) return {proposed, true};
  // The rest of p without the proposed token, by its cumulative sum.
  double total = 0;
  for (size_t i = 0; i < probabilities.size(); ++i)
    if (static_cast<int32_t>(i) != proposed) total += probabilities[i];
  const double target = draw_uniform * total;
  double cumulative = 0;
  int32_t last = -1;
  for (size_t i = 0; i < probabilities.size(); ++i) {
    if (static_cast<int32_t>(i) == proposed || probabilities[i] <= 0) continue;
    last = static_cast<int32_t>(i);
    cumulative += probabilities[i];
    if (target < cumulative) return {last, false};
  }
  // Rounding left the target at the very end: the last token with probability; none at all
  // (p was one-hot at the proposal, whose acceptance then failed only by rounding): accept it.
  return last >= 0 ? VerifiedToken{last, false} : VerifiedToken{proposed, true};
}

}  // namespace tessera
