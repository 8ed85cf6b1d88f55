// The sampler on the runner's logits tensor: greedy is the argmax taken on the tensor's device,
// the first maximum of each row as on the host; sampling reads the asked-for row.
#include <gtest/gtest.h>

#include "engine/sampler.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;

TEST(Sampler, GreedyOnATensorPicksEachRowsFirstMaximum) {
  Tensor logits = random_tensor({3, 50}, 4);
  std::vector<float> values = logits.to_floats();
  values[2 * 50 + 7] = values[2 * 50 + 9] = 100.0f;  // a tie: the first index wins
  logits = Tensor::from_floats(values, {3, 50});
  std::vector<int32_t> ids = greedy_token_ids(logits);
  ASSERT_EQ(ids.size(), 3u);
  SamplingParams greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy);
  for (int64_t row = 0; row < 3; ++row) {
    std::span<const float> host(values.data() + row * 50, 50);
    EXPECT_EQ(ids[static_cast<size_t>(row)], sampler.sample(host)) << row;
    EXPECT_EQ(sampler.sample(logits, row), sampler.sample(host)) << row;
  }
  EXPECT_EQ(ids[2], 7);
}

TEST(Sampler, SamplingReadsTheAskedForRow) {
  std::vector<float> values(2 * 10, -50.0f);
  values[3] = 10.0f;       // row 0: token 3 holds all the mass
  values[10 + 6] = 10.0f;  // row 1: token 6
  Tensor logits = Tensor::from_floats(values, {2, 10});
  SamplingParams params;
  params.temperature = 1.0;
  params.seed = 5;
  Sampler sampler(params);
  EXPECT_EQ(sampler.sample(logits, 0), 3);
  EXPECT_EQ(sampler.sample(logits, 1), 6);
}
