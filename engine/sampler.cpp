#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "compile/ops/ops.h"
#include "kernels/check.h"

namespace tessera {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool plain_greedy(const SamplingParams& params) {
  return params.greedy() && !params.has_penalties() && !params.logprobs;
}

void apply_penalties(std::vector<float>& z, const SamplingRow& row) {
  const SamplingParams& p = *row.params;
  const int64_t vocab = static_cast<int64_t>(z.size());
  auto in_vocab = [&](int32_t id) { return id >= 0 && id < vocab; };
  if (p.repetition_penalty != 1.0) {
    std::vector<bool> seen(z.size(), false);
    for (auto ids : {row.prompt_ids, row.output_ids})
      for (int32_t id : ids)
        if (in_vocab(id)) seen[id] = true;
    const float penalty = static_cast<float>(p.repetition_penalty);
    for (size_t i = 0; i < z.size(); ++i)
      if (seen[i]) z[i] = z[i] > 0 ? z[i] / penalty : z[i] * penalty;
  }
  if (p.presence_penalty != 0.0 || p.frequency_penalty != 0.0) {
    std::unordered_map<int32_t, int64_t> counts;
    for (int32_t id : row.output_ids)
      if (in_vocab(id)) ++counts[id];
    for (auto [id, count] : counts)
      z[id] -=
          static_cast<float>(p.frequency_penalty * static_cast<double>(count) + p.presence_penalty);
  }
}

int32_t first_argmax(std::span<const float> values) {
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

// The lowest value a token may have and still be drawn: the min-p and top-k cuts, then top-p
// over the tokens those keep (ties at a cut stay in).
float keep_threshold(const std::vector<float>& z, const SamplingParams& p) {
  const float top = *std::max_element(z.begin(), z.end());
  float threshold = -std::numeric_limits<float>::infinity();
  if (p.min_p > 0) threshold = top + static_cast<float>(std::log(p.min_p));
  const size_t vocab = z.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) {
    std::vector<float> sorted(z);
    std::nth_element(sorted.begin(), sorted.begin() + (p.top_k - 1), sorted.end(),
                     std::greater<float>());
    threshold = std::max(threshold, sorted[p.top_k - 1]);
  }
  if (p.top_p < 1) {
    std::vector<float> kept;
    for (float v : z)
      if (v >= threshold) kept.push_back(v);
    std::sort(kept.begin(), kept.end(), std::greater<float>());
    double total = 0;
    for (float v : kept) total += std::exp(static_cast<double>(v) - top);
    double mass = 0;
    for (float v : kept) {
      mass += std::exp(static_cast<double>(v) - top) / total;
      if (mass >= p.top_p) {
        threshold = std::max(threshold, v);
        break;
      }
    }
  }
  return threshold;
}

void fill_logprobs(std::span<const float> logits, int64_t count, SampledToken& token) {
  double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - top);
  const double log_total = top + std::log(sum);
  auto logprob = [&](int32_t id) { return static_cast<float>(logits[id] - log_total); };
  token.logprob = logprob(token.id);
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const size_t n = std::min<size_t>(static_cast<size_t>(count), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (size_t i = 0; i < n; ++i) token.top.push_back({ids[i], logprob(ids[i])});
}

}  // namespace

double sampling_uniform(uint64_t seed, int64_t output_index, int64_t token) {
  uint64_t bits = mix(seed ^ mix(static_cast<uint64_t>(output_index) * 0xD1B54A32D192ED03ull ^
                                 mix(static_cast<uint64_t>(token))));
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;  // never 0 or 1
}

SampledToken sample_row(std::span<const float> logits, const SamplingRow& row) {
  TESSERA_CHECK(row.params != nullptr && !logits.empty());
  const SamplingParams& p = *row.params;
  SampledToken token;
  std::vector<float> z(logits.begin(), logits.end());
  apply_penalties(z, row);
  if (p.greedy()) {
    token.id = first_argmax(z);
  } else {
    const float inverse_temperature = static_cast<float>(1.0 / p.temperature);
    for (float& v : z) v *= inverse_temperature;
    const float threshold = keep_threshold(z, p);
    double best = -std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < z.size(); ++i) {
      if (!(z[i] >= threshold)) continue;
      double gumbel = -std::log(
          -std::log(sampling_uniform(row.seed, row.output_index, static_cast<int64_t>(i))));
      double key = static_cast<double>(z[i]) + gumbel;
      if (key > best) {
        best = key;
        token.id = static_cast<int32_t>(i);
      }
    }
  }
  if (p.logprobs) fill_logprobs(logits, *p.logprobs, token);
  return token;
}

std::vector<int32_t> greedy_token_ids(const Tensor& logits) {
  TESSERA_CHECK(logits.dim() == 2 && logits.size(1) > 0, "logits must be [rows, vocab]");
  std::vector<int64_t> ids = ops::argmax(logits).to_ints();
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::vector<SampledToken> sample_tokens(const Tensor& logits, std::span<const SamplingRow> rows) {
  TESSERA_CHECK(logits.dim() == 2 && logits.size(0) == static_cast<int64_t>(rows.size()),
                "{} sampling rows for logits {}", rows.size(), logits.str());
  std::vector<SampledToken> tokens(rows.size());
  if (rows.empty()) return tokens;
  bool all_greedy = std::all_of(rows.begin(), rows.end(),
                                [](const SamplingRow& row) { return plain_greedy(*row.params); });
  if (all_greedy) {  // the common serving case: only ids leave the device
    std::vector<int32_t> ids = greedy_token_ids(logits);
    for (size_t i = 0; i < rows.size(); ++i) tokens[i].id = ids[i];
    return tokens;
  }
  std::vector<float> host = logits.to_floats();
  const size_t vocab = static_cast<size_t>(logits.size(1));
  for (size_t i = 0; i < rows.size(); ++i)
    tokens[i] = sample_row(std::span<const float>(host).subspan(i * vocab, vocab), rows[i]);
  return tokens;
}

}  // namespace tessera
