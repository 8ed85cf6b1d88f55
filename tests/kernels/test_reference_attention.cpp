// The float64 causal-attention reference the attention lab checks the GPU kernels with: a query
// sees its own and earlier positions only, weighted by the softmax of scaled dot products, and
// query heads share kv heads in groups.
#include <gtest/gtest.h>

#include <cmath>

#include "support/reference.h"

using namespace tessera::test;

TEST(ReferenceAttention, CausalSoftmaxOverEarlierPositionsWithSharedKvHeads) {
  // Two kv heads of size 1, four query heads: heads 0-1 read kv head 0, heads 2-3 kv head 1.
  RefTensor keys{{3, 2}, {1, 0, 0, 1, 2, 1}};
  RefTensor values{{3, 2}, {10, -1, 20, -2, 30, -3}};
  RefTensor query{{2, 4}, {1, 0, 0, 1, 0, 1, 1, 0}};  // positions 1 and 2
  RefTensor out = reference_causal_attention(query, keys, values, 4, 2, 0.5);
  ASSERT_EQ(out.sizes, (std::vector<int64_t>{2, 4}));
  auto mix = [](std::vector<double> scores, std::vector<double> picks) {
    double total = 0, sum = 0;
    for (double& score : scores) total += (score = std::exp(score));
    for (size_t i = 0; i < scores.size(); ++i) sum += scores[i] / total * picks[i];
    return sum;
  };
  // Position 1 sees keys 0 and 1. Head 0 (q 1, kv head 0: keys 1, 0).
  EXPECT_NEAR(out.values[0], mix({0.5, 0.0}, {10, 20}), 1e-12);
  EXPECT_NEAR(out.values[1], 15.0, 1e-12);                       // head 1: q 0, equal weights
  EXPECT_NEAR(out.values[3], mix({0.0, 0.5}, {-1, -2}), 1e-12);  // head 3: kv head 1 (keys 0, 1)
  // Position 2 sees all three keys. Head 2 (q 1, kv head 1: keys 0, 1, 1).
  EXPECT_NEAR(out.values[6], mix({0.0, 0.5, 0.5}, {-1, -2, -3}), 1e-12);
  EXPECT_NEAR(out.values[4], 20.0, 1e-12);  // head 0 at position 2: q 0, equal weights
  EXPECT_THROW(reference_causal_attention(query, keys, values, 3, 2, 0.5), std::invalid_argument);
}
