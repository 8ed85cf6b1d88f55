// The CPU "sample_tokens" kernel (contract in kernels/sampling.h): rows in parallel, each drawn
// exactly as the GPU kernel draws it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/kernel_checks.h"
#include "kernels/sampling.h"
#include "runtime/check.h"
#include "runtime/cpu/parallel.h"
#include "runtime/kernel_registry.h"

namespace tessera::cpu {
namespace {

// min-p, then top-k, then top-p over the tokens those keep (kernels/sampling.h).
float keep_threshold(const float* z, int64_t vocab, const float* params) {
  const float top = *std::max_element(z, z + vocab);
  float threshold = -std::numeric_limits<float>::infinity();
  if (params[kMinP] > 0) threshold = top + static_cast<float>(std::log(double{params[kMinP]}));
  const int64_t top_k = static_cast<int64_t>(params[kTopK]);
  if (top_k > 0 && top_k < vocab) {
    std::vector<float> sorted(z, z + vocab);
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(),
                     std::greater<float>());
    threshold = std::max(threshold, sorted[static_cast<size_t>(top_k - 1)]);
  }
  if (params[kTopP] < 1) {
    std::vector<float> kept;
    for (int64_t i = 0; i < vocab; ++i)
      if (z[i] >= threshold) kept.push_back(z[i]);
    std::sort(kept.begin(), kept.end(), std::greater<float>());
    double total = 0;
    for (float v : kept) total += std::exp(static_cast<double>(v) - top);
    double mass = 0;
    for (float v : kept) {
      mass += std::exp(static_cast<double>(v) - top);
      if (mass >= static_cast<double>(params[kTopP]) * total) {
        threshold = std::max(threshold, v);
        break;
      }
    }
  }
  return threshold;
}

void sample_row(const KernelArgs& args, int64_t row) {
  const int64_t vocab = args.inputs[0].size(1);
  const float* logits = args.inputs[0].data<float>() + row * vocab;
  const float* params = args.inputs[1].data<float>() + row * kNumSamplingParams;
  const int64_t* seeds = args.inputs[2].data<int64_t>() + row * 2;
  const int32_t* offsets = args.inputs[3].data<int32_t>();
  const int32_t* entries = args.inputs[4].data<int32_t>();
  float* z = args.outputs[3].data<float>() + row * vocab;
  std::copy(logits, logits + vocab, z);
  for (int32_t e = offsets[row]; e < offsets[row + 1]; ++e) {
    const int32_t token = entries[3 * e];
    z[token] = penalized_logit(z[token], entries[3 * e + 1], entries[3 * e + 2], params);
  }
  int32_t chosen = 0;
  if (params[kTemperature] == 0) {
    chosen = static_cast<int32_t>(std::max_element(z, z + vocab) - z);
  } else {
    const float inverse_temperature = static_cast<float>(1.0 / double{params[kTemperature]});
    for (int64_t i = 0; i < vocab; ++i) z[i] *= inverse_temperature;
    const float threshold = keep_threshold(z, vocab, params);
    const uint64_t row_key = sampling_row_key(static_cast<uint64_t>(seeds[0]), seeds[1]);
    float best = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < vocab; ++i) {
      if (!(z[i] >= threshold)) continue;
      const float key = z[i] + sampling_gumbel(row_key, i);
      if (key > best) {
        best = key;
        chosen = static_cast<int32_t>(i);
      }
    }
  }
  args.outputs[0].data<int32_t>()[row] = chosen;
  const int64_t asked = static_cast<int64_t>(params[kNumLogprobs]);
  if (asked < 0) return;
  const int64_t width = args.outputs[2].size(1);
  double top = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - top);
  const double log_total = top + std::log(sum);
  float* logprobs = args.outputs[1].data<float>() + row * (width + 1);
  int32_t* top_ids = args.outputs[2].data<int32_t>() + row * width;
  logprobs[0] = static_cast<float>(logits[chosen] - log_total);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const int64_t n = std::min({asked, width, vocab});
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int64_t i = 0; i < n; ++i) {
    top_ids[i] = ids[static_cast<size_t>(i)];
    logprobs[1 + i] = static_cast<float>(logits[ids[static_cast<size_t>(i)]] - log_total);
  }
}

void sample_tokens_kernel(const KernelArgs& args) {
  const int64_t rows = args.inputs[0].size(0);
  parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) sample_row(args, row);
  });
}

TESSERA_REGISTER_KERNEL("sample_tokens", DeviceType::cpu, sample_tokens_kernel);

template <typename Id>
void take_sampled_ids_from(const Id* sampled, int64_t count, const int32_t* tokens, int32_t* out,
                           int64_t size) {
  for (int64_t i = 0; i < size; ++i) out[i] = take_sampled_id(tokens[i], sampled, count);
}

void take_sampled_ids_kernel(const KernelArgs& args) {
  const Tensor& sampled = args.inputs[0];
  const Tensor& tokens = args.inputs[1];
  Tensor& out = args.outputs[0];
  check_take_sampled_ids(sampled, tokens, out);
  if (sampled.dtype() == DType::i64)
    take_sampled_ids_from(sampled.data<int64_t>(), sampled.numel(), tokens.data<int32_t>(),
                          out.data<int32_t>(), tokens.numel());
  else
    take_sampled_ids_from(sampled.data<int32_t>(), sampled.numel(), tokens.data<int32_t>(),
                          out.data<int32_t>(), tokens.numel());
}

TESSERA_REGISTER_KERNEL("take_sampled_ids", DeviceType::cpu, take_sampled_ids_kernel);

void apply_token_mask_kernel(const KernelArgs& args) {
  const Tensor& masks = args.inputs[0];
  const Tensor& rows = args.inputs[1];
  Tensor& logits = args.outputs[0];
  check_apply_token_mask(masks, rows, logits);
  const int64_t vocab = logits.size(1), words = masks.size(1), count = rows.size(1);
  for (int64_t i = 0; i < count; ++i) {
    const int32_t row = rows.data<int32_t>()[i], which = rows.data<int32_t>()[count + i];
    TESSERA_CHECK(row >= 0 && row < logits.size(0) && which >= 0 && which < masks.size(0),
                  "apply_token_mask: row {} of {}, mask {} of {}", row, logits.size(0), which,
                  masks.size(0));
    const auto* mask = reinterpret_cast<const uint32_t*>(masks.data<int32_t>() + which * words);
    float* z = logits.data<float>() + row * vocab;
    for (int64_t token = 0; token < vocab; ++token)
      if (!((mask[token / 32] >> (token % 32)) & 1u))
        z[token] = -std::numeric_limits<float>::infinity();
  }
}

TESSERA_REGISTER_KERNEL("apply_token_mask", DeviceType::cpu, apply_token_mask_kernel);

}  // namespace
}  // namespace tessera::cpu
