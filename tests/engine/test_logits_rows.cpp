// A sequence's several logits rows in one step (SequenceInput::logits_rows, what verifying
// proposed tokens needs): each row equals the logits of feeding the same tokens one step at a
// time, eager and compiled, beside a sequence of one row in the same batch; rows past a
// sequence's tokens or the runner's logits_rows_per_sequence are refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/kv_cache_manager.h"
#include "engine/runner/run_setup.h"
#include "models/architecture_registry.h"
#include "support/error_of.h"
#include "support/runner_steps.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
  return worst;
}

}  // namespace

TEST(LogitsRows, EachRowEqualsTheLogitsOfItsTokenFedAlone) {
  std::shared_ptr<const CausalLM> model =
      create_model(load_model("synthetic:tiny", LoadOptions{DType::f32, kCPU}), 64);
  const std::vector<int32_t> ids{1, 17, 42, 5, 99, 3, 250, 7};
  for (CompilationMode mode : {CompilationMode::eager, CompilationMode::compiled}) {
    SCOPED_TRACE(enum_name(mode));
    RunnerConfig config = runner_config(mode);
    config.logits_rows_per_sequence = 4;
    ModelRunner stepwise(model, with_kv_blocks_for(config, model->max_positions()));
    // The prompt's first 4 tokens, then one token a step: logits after tokens 5 .. 8.
    const std::vector<std::vector<float>> want = logits_by_chunks(stepwise, ids, {4, 1, 1, 1, 1});

    ModelRunner runner(model, with_kv_blocks_for(config, model->max_positions()));
    KVCacheManager blocks(runner.num_kv_blocks(), runner.config().cache.block_size);
    blocks.allocate(0, 4);
    const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 4);
    SequenceInput first{prompt, 0, blocks.block_table(0)};
    (void)runner.execute(std::span(&first, 1));
    // Tokens 5 .. 8 in one step, 4 rows (as 1 + 3 proposed tokens would be), beside another
    // sequence's one row.
    blocks.allocate(0, 8);
    blocks.allocate(1, 3);
    const std::vector<int32_t> rest(ids.begin() + 4, ids.end()), other{9, 8, 7};
    SequenceInput batch[2] = {{rest, 4, blocks.block_table(0)}, {other, 0, blocks.block_table(1)}};
    batch[0].logits_rows = 4;
    const std::vector<std::vector<float>> got = logits_to_host(runner.execute(batch));
    ASSERT_EQ(got.size(), 5u);
    for (size_t row = 0; row < 4; ++row)
      EXPECT_LT(max_difference(got[row], want[row + 1]), 1e-4) << "row " << row;
    ModelRunner alone(model, with_kv_blocks_for(config, model->max_positions()));
    EXPECT_LT(max_difference(got[4], logits_by_chunks(alone, other, {3}).at(0)), 1e-4);
  }
}

TEST(LogitsRows, MoreRowsThanTokensOrTheRunnerTakesAreRefused) {
  std::shared_ptr<const CausalLM> model =
      create_model(load_model("synthetic:tiny", LoadOptions{DType::f32, kCPU}), 64);
  RunnerConfig config = runner_config(CompilationMode::eager);
  config.logits_rows_per_sequence = 2;
  ModelRunner runner(model, with_kv_blocks_for(config, model->max_positions()));
  KVCacheManager blocks(runner.num_kv_blocks(), runner.config().cache.block_size);
  blocks.allocate(0, 3);
  const std::vector<int32_t> ids{1, 2, 3};
  SequenceInput input{ids, 0, blocks.block_table(0)};
  input.logits_rows = 3;
  EXPECT_THAT(error_of([&] { runner.execute(std::span(&input, 1)); }),
              ::testing::HasSubstr("asks for 3 logits rows; between 1 and 2"));
  input.logits_rows = 0;
  EXPECT_THAT(error_of([&] { runner.execute(std::span(&input, 1)); }),
              ::testing::HasSubstr("asks for 0 logits rows"));
}
