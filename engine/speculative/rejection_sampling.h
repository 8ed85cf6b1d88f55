// Verifying a proposed token of a sampled request (the standard speculative sampling rule) so
// that the output keeps the target model's distribution exactly: with the target's probabilities
// p and the proposer's q at a position, the proposed token x is accepted with probability
// min(1, p(x) / q(x)); otherwise the token is drawn from max(0, p - q), renormalized. A proposal
// made without probabilities (prompt lookup) is q = one-hot at x: x is accepted with probability
// p(x), otherwise drawn from p without x. The draws after the first rejection are not verified.
#pragma once

#include <cstdint>
#include <span>

namespace tessera {

struct VerifiedToken {
  int32_t token = -1;
  bool accepted = false;  // the proposed token; false: token was drawn in its place
};

// One position of a one-hot proposal: `probabilities` the target's (non-negative, summing to 1
// up to rounding), `accept_uniform` and `draw_uniform` uniform in [0, 1) from the request's
// generator.
VerifiedToken verify_one_hot(std::span<const float> probabilities, int32_t proposed,
                             double accept_uniform, double draw_uniform);

}  // namespace tessera
