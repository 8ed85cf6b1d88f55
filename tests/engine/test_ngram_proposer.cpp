// Prompt lookup (engine/speculative/ngram_proposer.h): the longest suffix that occurred before,
// its latest occurrence, the tokens after it up to the count asked for, and settings refused by
// name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "engine/speculative/ngram_proposer.h"
#include "runtime/check.h"
#include "support/error_of.h"

using namespace tessera;
using ::testing::ElementsAre;

namespace {

std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int64_t min_n, int64_t max_n,
                             int64_t proposed) {
  return propose_ngram(tokens, NgramSettings{min_n, max_n, proposed});
}

}  // namespace

TEST(NgramProposer, ProposesWhatFollowedTheSuffixBefore) {
  // "... 5 6" occurred at the start, followed by 7 8 9.
  EXPECT_THAT(propose({5, 6, 7, 8, 9, 1, 5, 6}, 1, 3, 3), ElementsAre(7, 8, 9));
  // At most `proposed` tokens, and no more than the tokens that follow.
  EXPECT_THAT(propose({5, 6, 7, 8, 9, 1, 5, 6}, 1, 3, 2), ElementsAre(7, 8));
  EXPECT_THAT(propose({1, 2, 3, 1, 2}, 2, 2, 5), ElementsAre(3, 1, 2));
}

TEST(NgramProposer, PrefersTheLongestSuffixThenItsLatestOccurrence) {
  // The 1-gram "3" last occurred before 9; the 2-gram "2 3" occurred before 4: the longer wins.
  EXPECT_THAT(propose({2, 3, 4, 0, 3, 9, 7, 2, 3}, 1, 2, 1), ElementsAre(4));
  // Two earlier occurrences of "2 3": the latest (followed by 8) wins.
  EXPECT_THAT(propose({2, 3, 4, 2, 3, 8, 2, 3}, 2, 2, 1), ElementsAre(8));
  // The suffix may overlap its earlier occurrence (a run of one token).
  EXPECT_THAT(propose({7, 7, 7, 7}, 2, 3, 4), ElementsAre(7));
}

TEST(NgramProposer, ProposesNothingWithoutAMatchOfMinN) {
  EXPECT_TRUE(propose({1, 2, 3, 4}, 1, 3, 3).empty());
  // "3" occurred before, but min_n asks for 2 tokens.
  EXPECT_TRUE(propose({3, 5, 1, 3}, 2, 3, 3).empty());
  EXPECT_TRUE(propose({}, 1, 3, 3).empty());
  EXPECT_TRUE(propose({4}, 1, 3, 3).empty());
}

TEST(NgramProposer, SettingsThatCannotProposeAreRefusedByName) {
  EXPECT_THAT(tessera::testing::error_of([] {
                validate_ngram_settings({0, 3, 2});
              }),
              ::testing::HasSubstr("prompt_lookup_min must be at least 1"));
  EXPECT_THAT(tessera::testing::error_of([] {
                validate_ngram_settings({3, 2, 2});
              }),
              ::testing::HasSubstr("prompt_lookup_max (2) must be at least prompt_lookup_min (3)"));
  EXPECT_THAT(tessera::testing::error_of([] {
                validate_ngram_settings({1, 2, 0});
              }),
              ::testing::HasSubstr("num_speculative_tokens must be at least 1"));
  validate_ngram_settings({1, 4, 5});
}
