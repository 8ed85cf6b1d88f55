// Speculative sampling of a one-hot proposal (engine/speculative/rejection_sampling.h): over many
// seeded draws the tokens follow the target distribution (a chi-square test whose false-alarm
// rate is 1e-6: 35.9 for 5 degrees of freedom), for a likely and an unlikely proposal; the
// proposal is accepted as often as its probability; the rule that accepts every proposal fails
// the same test.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "engine/speculative/rejection_sampling.h"

using namespace tessera;

namespace {

constexpr std::array<float, 6> kTarget = {0.05f, 0.3f, 0.25f, 0.1f, 0.2f, 0.1f};
constexpr int kDraws = 200000;
constexpr double kChiSquareAtOneInAMillion = 35.9;  // 5 degrees of freedom

double chi_square(const std::vector<int>& counts) {
  double statistic = 0;
  for (size_t i = 0; i < kTarget.size(); ++i) {
    const double expected = kDraws * static_cast<double>(kTarget[i]);
    statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return statistic;
}

}  // namespace

TEST(RejectionSampling, OneHotProposalsKeepTheTargetDistribution) {
  for (int32_t proposed : {2, 0}) {
    SCOPED_TRACE(proposed);
    std::mt19937_64 generator(1234 + static_cast<uint64_t>(proposed));
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    std::vector<int> counts(kTarget.size(), 0);
    int accepted = 0;
    for (int draw = 0; draw < kDraws; ++draw) {
      const double accept = uniform(generator), pick = uniform(generator);
      const VerifiedToken token = verify_one_hot(kTarget, proposed, accept, pick);
      ASSERT_GE(token.token, 0);
      ++counts[static_cast<size_t>(token.token)];
      accepted += token.accepted;
      EXPECT_EQ(token.accepted, token.token == proposed);
    }
    EXPECT_LT(chi_square(counts), kChiSquareAtOneInAMillion);
    // Accepted as often as p(x): within 5 standard deviations of a binomial count.
    const double p = kTarget[static_cast<size_t>(proposed)];
    EXPECT_NEAR(accepted, kDraws * p, 5 * std::sqrt(kDraws * p * (1 - p)));
  }
}

TEST(RejectionSampling, AcceptingEveryProposalFailsTheSameTest) {
  std::vector<int> counts(kTarget.size(), 0);
  counts[2] = kDraws;  // what a rule that always accepts token 2 gives
  EXPECT_GT(chi_square(counts), kChiSquareAtOneInAMillion);
}

TEST(RejectionSampling, RoundingAtTheEndOfTheCumulativeSumStillDraws) {
  const std::array<float, 3> target = {0.0f, 0.5f, 0.5f};
  // The largest uniform below 1 lands on the last token with probability.
  EXPECT_EQ(verify_one_hot(target, 0, 0.9, std::nextafter(1.0, 0.0)).token, 2);
  // A target one-hot at the proposal but for rounding (its sum a little under 1): a uniform above
  // p(x) leaves no other token to draw, and the proposal stands.
  const std::array<float, 3> one_hot = {0.0f, 0.99999f, 0.0f};
  const VerifiedToken kept = verify_one_hot(one_hot, 1, 0.999995, 0.5);
  EXPECT_EQ(kept.token, 1);
  EXPECT_TRUE(kept.accepted);
}
