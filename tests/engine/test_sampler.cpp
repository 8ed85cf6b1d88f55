// The sampler's semantics (vLLM's): greedy is the first maximum, found on the logits' device;
// the draw follows the softmax at the temperature after min-p, top-k and top-p cuts; a seeded
// row draws the same token whatever else is in the batch; penalties change the logits as vLLM's
// do; logprobs are those of the model's own distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/sampler.h"
#include "runtime/backend/backend.h"
#include "runtime/check.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

SamplingParams with_temperature(double temperature) {
  SamplingParams params;
  params.temperature = temperature;
  return params;
}

// Logits whose softmax is `probabilities` exactly.
std::vector<float> logits_of(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// How often each token is drawn over `draws` output indices of one seed.
std::map<int32_t, int> histogram(const std::vector<float>& logits, const SamplingParams& params,
                                 int draws) {
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i)
    ++counts[sample_row(logits, SamplingRow{&params, 1234, i, {}, {}}).id];
  return counts;
}

}  // namespace

TEST(Sampler, GreedyOnATensorPicksEachRowsFirstMaximum) {
  Tensor logits = random_tensor({3, 50}, 4);
  std::vector<float> values = logits.to_floats();
  values[2 * 50 + 7] = values[2 * 50 + 9] = 100.0f;  // a tie: the first index wins
  logits = Tensor::from_floats(values, {3, 50});
  SamplingParams greedy = with_temperature(0);
  std::vector<SamplingRow> rows(3, SamplingRow{&greedy, 0, 0, {}, {}});
  std::vector<SampledToken> tokens = sample_tokens(logits, rows);
  ASSERT_EQ(tokens.size(), 3u);
  for (size_t row = 0; row < 3; ++row) {
    const float* begin = values.data() + row * 50;
    EXPECT_EQ(tokens[row].id, std::max_element(begin, begin + 50) - begin) << row;
  }
  EXPECT_EQ(tokens[2].id, 7);
}

// Asynchronous scheduling's hand-over: the draws stay on the device, and an input id -1 - r
// becomes draw r there; the host's copy is the same draws.
TEST(Sampler, LaunchedDrawsFeedTheNextStepsInputs) {
  std::vector<float> values(3 * 20, 0.0f);
  values[0 * 20 + 11] = values[1 * 20 + 4] = values[2 * 20 + 17] = 5.0f;
  Tensor logits = Tensor::from_floats(values, {3, 20});
  for (bool greedy_only : {true, false}) {
    SamplingParams greedy = with_temperature(0);
    SamplingParams greedy_with_logprobs = greedy;
    greedy_with_logprobs.logprobs = 1;  // not plain greedy: the sampling kernel's path
    std::vector<SamplingRow> rows(3, SamplingRow{&greedy, 0, 0, {}, {}});
    if (!greedy_only) rows[1].params = &greedy_with_logprobs;
    SampledBatch draws = launch_sampling(logits, rows);
    ASSERT_EQ(draws.size(), 3);
    const std::vector<int64_t> with_rows{7, -3, -1, 9, -2};
    Tensor inputs = Tensor::from_ints(with_rows, {5}, DType::i32);
    take_sampled_ids(inputs, draws.device_ids(), inputs);
    EXPECT_EQ(inputs.to_ints(), (std::vector<int64_t>{7, 17, 11, 9, 4})) << greedy_only;
    std::vector<SampledToken> tokens = draws.wait();
    EXPECT_EQ(tokens[0].id, 11);
    EXPECT_EQ(tokens[1].id, 4);
    EXPECT_EQ(tokens[2].id, 17);
    EXPECT_EQ(tokens[1].top.size(), greedy_only ? 0u : 1u);
  }
}

TEST(Sampler, EachRowIsSampledFromItsOwnLogits) {
  std::vector<float> values(2 * 10, -50.0f);
  values[3] = 10.0f;       // row 0: token 3 holds all the mass
  values[10 + 6] = 10.0f;  // row 1: token 6
  Tensor logits = Tensor::from_floats(values, {2, 10});
  SamplingParams params = with_temperature(1.0);
  std::vector<SamplingRow> rows(2, SamplingRow{&params, 5, 0, {}, {}});
  std::vector<SampledToken> tokens = sample_tokens(logits, rows);
  EXPECT_EQ(tokens[0].id, 3);
  EXPECT_EQ(tokens[1].id, 6);
}

TEST(Sampler, DrawsFollowTheSoftmaxAtTheTemperature) {
  const std::vector<double> p = {0.5, 0.25, 0.15, 0.1};
  std::vector<float> logits = logits_of(p);
  const int draws = 20000;
  auto counts = histogram(logits, with_temperature(1.0), draws);
  for (size_t token = 0; token < p.size(); ++token) {
    double expected = p[token] * draws;
    double sigma = std::sqrt(draws * p[token] * (1 - p[token]));
    EXPECT_NEAR(counts[static_cast<int32_t>(token)], expected, 5 * sigma) << token;
  }
  // At temperature 2 the distribution is flatter: p ~ sqrt(p) renormalized.
  auto flat = histogram(logits, with_temperature(2.0), draws);
  double total = 0;
  for (double v : p) total += std::sqrt(v);
  double expected = std::sqrt(p[3]) / total * draws;
  EXPECT_NEAR(flat[3], expected, 5 * std::sqrt(expected));
}

TEST(Sampler, TopKTopPAndMinPCutTheTail) {
  std::vector<float> logits = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingParams top_k = with_temperature(1.0);
  top_k.top_k = 2;
  auto counts = histogram(logits, top_k, 4000);
  EXPECT_EQ(counts.size(), 2u);  // only tokens 0 and 1
  EXPECT_NEAR(counts[0] / 4000.0, 0.5 / 0.8, 0.04);
  SamplingParams top_p = with_temperature(1.0);
  top_p.top_p = 0.7;  // 0.5 + 0.3 reaches it
  counts = histogram(logits, top_p, 4000);
  EXPECT_EQ(counts.size(), 2u);
  SamplingParams min_p = with_temperature(1.0);
  min_p.min_p = 0.25;  // keeps p >= 0.125: tokens 0, 1, 2
  counts = histogram(logits, min_p, 4000);
  EXPECT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts.count(3), 0u);
  SamplingParams one = with_temperature(1.0);
  one.top_k = 1;
  counts = histogram(logits, one, 200);
  EXPECT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 0);
}

TEST(Sampler, ASeededRowDrawsTheSameWhateverElseIsInTheBatch) {
  Tensor logits = random_tensor({4, 300}, 9);
  SamplingParams seeded = with_temperature(1.0);
  SamplingParams other = with_temperature(0.7);
  other.top_p = 0.9;
  std::vector<SamplingRow> alone = {SamplingRow{&seeded, 42, 3, {}, {}}};
  int32_t by_itself = sample_tokens(logits.slice(0, 2, 3).contiguous(), alone)[0].id;
  std::vector<SamplingRow> crowd = {
      SamplingRow{&other, 7, 0, {}, {}}, SamplingRow{&other, 8, 5, {}, {}},
      SamplingRow{&seeded, 42, 3, {}, {}}, SamplingRow{&other, 9, 1, {}, {}}};
  EXPECT_EQ(sample_tokens(logits, crowd)[2].id, by_itself);
  // Another seed or another output index draws independently: over many, not always the same.
  int same = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<SamplingRow> row = {SamplingRow{&seeded, seed, 3, {}, {}}};
    same += sample_tokens(logits.slice(0, 2, 3).contiguous(), row)[0].id == by_itself;
  }
  EXPECT_LT(same, 50);
}

TEST(Sampler, PenaltiesChangeTheLogitsAsVllmDoes) {
  std::vector<float> logits = {2.0f, 1.9f, -1.0f, -1.2f};
  SamplingParams greedy = with_temperature(0);
  std::vector<int32_t> prompt = {0};
  std::vector<int32_t> output = {2};
  EXPECT_EQ(sample_row(logits, SamplingRow{&greedy, 0, 0, prompt, output}).id, 0);
  SamplingParams repetition = greedy;
  repetition.repetition_penalty = 1.1;  // 2.0 / 1.1 < 1.9: token 0 loses
  EXPECT_EQ(sample_row(logits, SamplingRow{&repetition, 0, 0, prompt, output}).id, 1);
  std::vector<float> negative = {-1.0f, -1.05f};
  std::vector<int32_t> first = {0};
  repetition.repetition_penalty = 1.1;  // -1.0 * 1.1 < -1.05: a negative logit is multiplied
  EXPECT_EQ(sample_row(negative, SamplingRow{&repetition, 0, 0, first, {}}).id, 1);
  SamplingParams presence = greedy;
  presence.presence_penalty = 0.2;  // only output tokens count: token 0 is in the prompt only
  std::vector<int32_t> repeated = {0, 0, 0};
  EXPECT_EQ(sample_row(logits, SamplingRow{&presence, 0, 0, prompt, {}}).id, 0);
  EXPECT_EQ(sample_row(logits, SamplingRow{&presence, 0, 0, {}, repeated}).id, 1);
  SamplingParams frequency = greedy;
  frequency.frequency_penalty = 0.04;  // 2.0 - 3 * 0.04 < 1.9
  EXPECT_EQ(sample_row(logits, SamplingRow{&frequency, 0, 0, {}, repeated}).id, 1);
  std::vector<int32_t> once = {0};
  EXPECT_EQ(sample_row(logits, SamplingRow{&frequency, 0, 0, {}, once}).id, 0);
}

TEST(Sampler, LogprobsAreTheModelsOwnAndOnlyWhenAsked) {
  std::vector<double> p = {0.1, 0.6, 0.3};
  std::vector<float> logits = logits_of(p);
  SamplingParams greedy = with_temperature(0);
  SampledToken plain = sample_row(logits, SamplingRow{&greedy, 0, 0, {}, {}});
  EXPECT_TRUE(plain.top.empty());
  SamplingParams asking = with_temperature(0);
  asking.logprobs = 2;
  asking.repetition_penalty = 3;  // penalties change the pick, not the reported logprobs
  std::vector<int32_t> output = {1};
  SampledToken token = sample_row(logits, SamplingRow{&asking, 0, 0, {}, output});
  EXPECT_EQ(token.id, 2);
  EXPECT_NEAR(token.logprob, std::log(0.3), 1e-5);
  ASSERT_EQ(token.top.size(), 2u);
  EXPECT_EQ(token.top[0].id, 1);
  EXPECT_NEAR(token.top[0].logprob, std::log(0.6), 1e-5);
  EXPECT_EQ(token.top[1].id, 2);
  // Through the tensor path too (the rows that ask leave the device).
  Tensor tensor = Tensor::from_floats(logits, {1, 3});
  std::vector<SamplingRow> rows = {SamplingRow{&asking, 0, 0, {}, output}};
  EXPECT_NEAR(sample_tokens(tensor, rows)[0].logprob, std::log(0.3), 1e-5);
}

TEST(Sampler, ParamsOutOfRangeNameTheField) {
  auto message = [](SamplingParams params) {
    try {
      params.validate(100);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  SamplingParams p;
  p.temperature = -1;
  EXPECT_NE(message(p).find("temperature"), std::string::npos);
  p = {};
  p.top_p = 0;
  EXPECT_NE(message(p).find("top_p"), std::string::npos);
  p = {};
  p.max_tokens = 0;
  EXPECT_NE(message(p).find("max_tokens"), std::string::npos);
  p = {};
  p.stop_token_ids = {100};
  EXPECT_NE(message(p).find("stop_token_ids"), std::string::npos);
  p = {};
  p.logprobs = 21;
  EXPECT_NE(message(p).find("logprobs"), std::string::npos);
  p = {};
  p.stop = {""};
  EXPECT_NE(message(p).find("stop"), std::string::npos);
  EXPECT_EQ(message(SamplingParams{}), "");
}

TEST(GpuSampler, LaunchedDrawsFeedInputsOnTheDevice) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  std::vector<float> values(3 * 20, 0.0f);
  values[0 * 20 + 11] = values[1 * 20 + 4] = values[2 * 20 + 17] = 5.0f;
  Tensor logits = Tensor::from_floats(values, {3, 20}).to(gpu);
  SamplingParams greedy = with_temperature(0);
  SamplingParams sampled = with_temperature(0.5);  // the sampling kernel's i32 draws
  for (const SamplingParams* params : {&greedy, &sampled}) {
    std::vector<SamplingRow> rows(3, SamplingRow{params, 9, 0, {}, {}});
    SampledBatch draws = launch_sampling(logits, rows);
    const std::vector<int64_t> with_rows{7, -3, -1, 9, -2};
    Tensor inputs = Tensor::from_ints(with_rows, {5}, DType::i32, gpu);
    take_sampled_ids(inputs, draws.device_ids(), inputs);
    std::vector<SampledToken> tokens = draws.wait();
    EXPECT_EQ(inputs.to_ints(),
              (std::vector<int64_t>{7, tokens[2].id, tokens[0].id, 9, tokens[1].id}));
    if (params == &greedy) {
      EXPECT_EQ(tokens[2].id, 17);
    }
  }
}

TEST(GpuSampler, TheDeviceDrawsWhatTheCpuDraws) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  const int64_t vocab = 5000;
  Tensor logits = random_tensor({9, vocab}, 21);
  std::vector<SamplingParams> params(9);
  for (SamplingParams& p : params) p.temperature = 0.9;
  params[0].temperature = 0;  // greedy, with penalties and logprobs: not the argmax shortcut
  params[0].repetition_penalty = 1.3;
  params[0].logprobs = 5;
  params[1].top_k = 40;
  params[2].top_p = 0.8;
  params[3].min_p = 0.05;
  params[4].top_k = 100;
  params[4].top_p = 0.9;
  params[4].min_p = 0.01;
  params[5].presence_penalty = 0.5;
  params[5].frequency_penalty = 0.3;
  params[6].logprobs = 20;
  params[7].temperature = 1.7;
  params[8].top_k = 1;
  std::vector<int32_t> prompt = {1, 2, 3, 3000};
  std::vector<int32_t> output = {7, 7, 4999, 12};
  std::vector<SamplingRow> rows;
  for (size_t i = 0; i < params.size(); ++i)
    rows.push_back(SamplingRow{&params[i], 1000 + i, static_cast<int64_t>(i) * 3, prompt, output});
  for (int step = 0; step < 4; ++step) {  // several draws per row
    for (SamplingRow& row : rows) row.output_index += 1;
    std::vector<SampledToken> cpu = sample_tokens(logits, rows);
    std::vector<SampledToken> device = sample_tokens(logits.to(gpu), rows);
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(device[i].id, cpu[i].id) << "row " << i << " step " << step;
      EXPECT_NEAR(device[i].logprob, cpu[i].logprob, 1e-4) << i;
      ASSERT_EQ(device[i].top.size(), cpu[i].top.size()) << i;
      for (size_t k = 0; k < cpu[i].top.size(); ++k) {
        EXPECT_EQ(device[i].top[k].id, cpu[i].top[k].id) << i << " top " << k;
        EXPECT_NEAR(device[i].top[k].logprob, cpu[i].top[k].logprob, 1e-4) << i;
      }
    }
  }
}

namespace {

// Masks for rows 0 and 2 of a [3, vocab] batch: row 0 allows the tokens divisible by 7, row 2
// only tokens 3 and vocab - 1.
TokenMasks example_masks(int64_t vocab) {
  TokenMasks masks;
  masks.words_per_row = (vocab + 31) / 32;
  masks.rows = {0, 2};
  masks.mask_of_row = {1, 0};  // the masks listed in the other order than their rows
  masks.words.assign(static_cast<size_t>(2 * masks.words_per_row), 0u);
  auto allow = [&](size_t mask, int64_t token) {
    masks
        .words[mask * static_cast<size_t>(masks.words_per_row) + static_cast<size_t>(token / 32)] |=
        1u << (token % 32);
  };
  for (int64_t token = 0; token < vocab; token += 7) allow(1, token);
  allow(0, 3);
  allow(0, vocab - 1);
  return masks;
}

}  // namespace

TEST(Sampler, TokenMasksLeaveOnlyTheAllowedTokens) {
  const int64_t vocab = 100;
  const TokenMasks masks = example_masks(vocab);
  for (double temperature : {0.0, 1.0, 3.0}) {
    SamplingParams params = with_temperature(temperature);
    params.logprobs = 2;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      Tensor logits = random_tensor({3, vocab}, 5);
      const std::vector<float> raw = logits.to_floats();
      std::vector<SamplingRow> rows(3, SamplingRow{&params, seed, 0, {}, {}});
      std::vector<SampledToken> tokens = launch_sampling(logits, rows, &masks).wait();
      EXPECT_EQ(tokens[0].id % 7, 0) << temperature << " " << seed;
      EXPECT_TRUE(tokens[2].id == 3 || tokens[2].id == vocab - 1) << tokens[2].id;
      // The row without a mask is untouched: its draw is that of the raw logits.
      Tensor unmasked = Tensor::from_floats(raw, {3, vocab});
      EXPECT_EQ(tokens[1].id, sample_tokens(unmasked, rows)[1].id);
      if (temperature == 0) {
        EXPECT_EQ(tokens[2].id, raw[2 * vocab + 3] >= raw[2 * vocab + vocab - 1] ? 3 : vocab - 1);
      }
    }
  }
}

TEST(GpuSampler, TokenMasksDrawWhatTheCpuDraws) {
  Device gpu;
  if (!first_gpu(&gpu)) GTEST_SKIP() << "no GPU device is available";
  const int64_t vocab = 70001;  // not a multiple of 32
  const TokenMasks masks = example_masks(vocab);
  SamplingParams params = with_temperature(0.8);
  for (uint64_t seed = 0; seed < 8; ++seed) {
    std::vector<SamplingRow> rows(3, SamplingRow{&params, seed, 0, {}, {}});
    std::vector<SampledToken> cpu =
        launch_sampling(random_tensor({3, vocab}, 9), rows, &masks).wait();
    std::vector<SampledToken> device =
        launch_sampling(random_tensor({3, vocab}, 9).to(gpu), rows, &masks).wait();
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(device[i].id, cpu[i].id) << seed << " row " << i;
    EXPECT_EQ(device[0].id % 7, 0);
  }
}
