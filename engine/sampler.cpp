#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "compile/ops/ops.h"
#include "kernels/check.h"

namespace tessera {

void SamplingParams::validate() const {
  TESSERA_REQUIRE(std::isfinite(temperature) && temperature >= 0,
                  "temperature must be >= 0 (0 is greedy), got {}", temperature);
  TESSERA_REQUIRE(top_k >= 0, "top_k must be >= 0 (0 turns it off), got {}", top_k);
  TESSERA_REQUIRE(top_p > 0 && top_p <= 1, "top_p must be in (0, 1], got {}", top_p);
  TESSERA_REQUIRE(min_p >= 0 && min_p <= 1, "min_p must be in [0, 1], got {}", min_p);
  TESSERA_REQUIRE(max_tokens >= 1, "max_tokens must be >= 1, got {}", max_tokens);
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), generator_(params.seed ? *params.seed : std::random_device{}()) {
  params_.validate();
}

std::vector<int32_t> greedy_token_ids(const Tensor& logits) {
  TESSERA_CHECK(logits.dim() == 2 && logits.size(1) > 0, "logits must be [rows, vocab]");
  std::vector<int64_t> ids = ops::argmax(logits).to_ints();
  return std::vector<int32_t>(ids.begin(), ids.end());
}

int32_t Sampler::sample(const Tensor& logits, int64_t row) {
  TESSERA_CHECK(logits.dim() == 2 && row >= 0 && row < logits.size(0), "row {} of {}", row,
                logits.str());
  Tensor row_logits = logits.slice(0, row, row + 1);
  if (params_.temperature == 0) return greedy_token_ids(row_logits).at(0);
  std::vector<float> values = row_logits.to_floats();
  return sample(values);
}

int32_t Sampler::sample(std::span<const float> logits) {
  TESSERA_CHECK(!logits.empty());
  if (params_.temperature == 0) {  // greedy: the first maximum, like argmax
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t keep = order.size();
  if (params_.top_k > 0) keep = std::min(keep, static_cast<size_t>(params_.top_k));
  double top = logits[order[0]];
  std::vector<double> probabilities(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    probabilities[i] = std::exp((logits[order[i]] - top) / params_.temperature);
    total += probabilities[i];
  }
  for (double& p : probabilities) p /= total;
  if (params_.min_p > 0) {  // drop tokens under min_p times the most likely one
    double floor = params_.min_p * probabilities[0];
    while (keep > 1 && probabilities[keep - 1] < floor) --keep;
  }
  if (params_.top_p < 1) {  // the smallest prefix whose mass reaches top_p
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += probabilities[i];
      if (mass >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::discrete_distribution<size_t> pick(probabilities.begin(), probabilities.begin() + keep);
  return order[pick(generator_)];
}

}  // namespace tessera
