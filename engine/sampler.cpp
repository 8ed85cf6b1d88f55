#include "engine/sampler.h"

#include "engine/runner/model_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "compile/ops/ops.h"
#include "kernels/sampling.h"
#include "runtime/check.h"
#include "runtime/kernel_registry.h"
#include "runtime/profiler/profiler.h"

namespace tessera {
namespace {

// A row whose draw is its logits' first maximum (after its grammar's mask, if any).
bool argmax_row(const SamplingParams& params) {
  return params.greedy() && !params.has_penalties() && !params.logprobs;
}

// An argmax row with nothing to apply first: a runner may take its pick with the forward.
bool plain_greedy(const SamplingParams& params) {
  return argmax_row(params) && !params.grammar;
}

// The "sample_tokens" kernel's inputs (kernels/sampling.h), built on the host.
struct KernelInputs {
  std::vector<float> params;
  std::vector<int64_t> seeds;
  std::vector<int64_t> offsets{0};
  std::vector<int64_t> entries;  // token, output count, in prompt
  int64_t width = 1;             // top logprobs per row (at least one column)
};

KernelInputs kernel_inputs(std::span<const SamplingRow> rows, int64_t vocab) {
  KernelInputs in;
  for (const SamplingRow& row : rows) {
    const SamplingParams& p = *row.params;
    const int64_t top_k = p.top_k > 0 && p.top_k < vocab ? p.top_k : 0;
    const int64_t logprobs = p.logprobs ? *p.logprobs : -1;
    in.width = std::max(in.width, logprobs);
    in.params.insert(
        in.params.end(),
        {static_cast<float>(p.temperature), static_cast<float>(p.top_p),
         static_cast<float>(p.min_p), static_cast<float>(top_k),
         static_cast<float>(p.repetition_penalty), static_cast<float>(p.presence_penalty),
         static_cast<float>(p.frequency_penalty), static_cast<float>(logprobs)});
    in.seeds.insert(in.seeds.end(), {static_cast<int64_t>(row.seed), row.output_index});
    if (p.has_penalties()) {
      std::map<int32_t, std::pair<int64_t, int64_t>> tokens;  // count in the output, in prompt
      for (int32_t id : row.output_ids)
        if (id >= 0 && id < vocab) ++tokens[id].first;
      if (p.repetition_penalty != 1.0)
        for (int32_t id : row.prompt_ids)
          if (id >= 0 && id < vocab) tokens[id].second = 1;
      for (auto [id, use] : tokens)
        in.entries.insert(in.entries.end(), {id, use.first, use.second});
    }
    in.offsets.push_back(static_cast<int64_t>(in.entries.size() / 3));
  }
  if (in.entries.empty()) in.entries = {0, 0, 0};  // the kernel reads none, but needs a buffer
  return in;
}

// A host tensor's copy on `device`, queued without waiting for the device (DeviceBackend::upload):
// the draws' inputs go up while the forward before them still runs.
Tensor upload(const void* data, Shape sizes, DType dtype, Device device) {
  Tensor out = Tensor::empty(std::move(sizes), dtype, device);
  backend(device).upload(out.data_ptr(), device, data, out.nbytes());
  return out;
}

Tensor upload(const Tensor& host, Device device) {
  if (device.is_cpu()) return host;
  TESSERA_CHECK(host.device().is_cpu() && host.is_contiguous(), "upload of {}", host.str());
  return upload(host.data_ptr(), host.sizes(), host.dtype(), device);
}

// The grammars' masks, on the logits' device, applied in place.
void apply_token_masks(const Tensor& logits, const TokenMasks& masks) {
  const auto count = static_cast<int64_t>(masks.rows.size());
  const int64_t distinct = masks.num_masks();
  TESSERA_CHECK(masks.mask_of_row.size() == masks.rows.size() &&
                    masks.words.size() == static_cast<size_t>(distinct * masks.words_per_row),
                "{} mask words for {} rows of {}", masks.words.size(), count, masks.words_per_row);
  // The words go up from the masks' own buffer (the CPU backend's upload copies them too).
  const Tensor words =
      upload(masks.words.data(), {distinct, masks.words_per_row}, DType::i32, logits.device());
  std::vector<int64_t> rows(masks.rows.begin(), masks.rows.end());
  rows.insert(rows.end(), masks.mask_of_row.begin(), masks.mask_of_row.end());
  const Device device = logits.device();
  const Tensor inputs[] = {words, upload(Tensor::from_ints(rows, {2, count}, DType::i32), device)};
  Tensor outputs[] = {logits};
  Attributes no_attributes;
  ProfiledLaunch profiled("apply_token_mask", KernelClass::sampling, [&] {
    return LaunchDetail{static_cast<double>(words.nbytes() + count * logits.size(1) * 4), 0,
                        fmt::format("{} of {} rows, {} masks", count, logits.size(0), distinct)};
  });
  run_kernel("apply_token_mask", device.type, KernelArgs{inputs, no_attributes, outputs});
}

std::unique_ptr<HostReadback> start_readback(const Tensor& tensor) {
  TESSERA_CHECK(tensor.is_contiguous(), "a readback of a strided tensor");
  return backend(tensor.device())
      .start_readback(tensor.data_ptr(), tensor.device(), tensor.nbytes());
}

}  // namespace

SampledBatch::~SampledBatch() = default;

SampledBatch launch_sampling(const Tensor& logits, std::span<const SamplingRow> rows,
                             const TokenMasks* masks) {
  TESSERA_CHECK(logits.dim() == 2 && logits.size(0) == static_cast<int64_t>(rows.size()),
                "{} sampling rows for logits {}", rows.size(), logits.str());
  SampledBatch batch;
  batch.vocab_ = logits.size(1);
  for (const SamplingRow& row : rows)
    batch.asked_logprobs_.push_back(row.params->logprobs ? *row.params->logprobs : -1);
  if (rows.empty()) return batch;
  if (masks && !masks->empty()) apply_token_masks(logits, *masks);
  if (std::all_of(rows.begin(), rows.end(),
                  [](const SamplingRow& row) { return argmax_row(*row.params); }))
    return greedy_draws(greedy_ids(logits));  // the common case
  const Device device = logits.device();
  const int64_t count = static_cast<int64_t>(rows.size());
  const int64_t vocab = logits.size(1);
  KernelInputs in = kernel_inputs(rows, vocab);
  const int64_t entries = static_cast<int64_t>(in.entries.size() / 3);
  const Tensor inputs[] = {
      logits.contiguous(),
      upload(Tensor::from_floats(in.params, {count, kNumSamplingParams}), device),
      upload(Tensor::from_ints(in.seeds, {count, 2}), device),
      upload(Tensor::from_ints(in.offsets, {count + 1}, DType::i32), device),
      upload(Tensor::from_ints(in.entries, {entries, 3}, DType::i32), device)};
  Tensor outputs[] = {Tensor::empty({count}, DType::i32, device),
                      Tensor::empty({count, in.width + 1}, DType::f32, device),
                      Tensor::empty({count, in.width}, DType::i32, device),
                      Tensor::empty({count, vocab}, DType::f32, device)};
  Attributes no_attributes;
  {
    // The fewest bytes: the logits read once, the ids written.
    ProfiledLaunch profiled("sample_tokens", KernelClass::sampling, [&] {
      return LaunchDetail{static_cast<double>(logits.nbytes() + outputs[0].nbytes()), 0,
                          fmt::format("{}x{} {}", count, vocab, dtype_name(logits.dtype()))};
    });
    run_kernel("sample_tokens", device.type, KernelArgs{inputs, no_attributes, outputs});
  }
  // Only the ids cross to the host, and the logprobs when a row asked for them.
  batch.ids_ = outputs[0];
  batch.ids_copy_ = start_readback(batch.ids_);
  if (std::any_of(rows.begin(), rows.end(),
                  [](const SamplingRow& row) { return row.params->logprobs.has_value(); })) {
    batch.width_ = in.width;
    batch.logprobs_ = outputs[1];
    batch.top_ids_ = outputs[2];
    batch.logprobs_copy_ = start_readback(batch.logprobs_);
    batch.top_ids_copy_ = start_readback(batch.top_ids_);
  }
  return batch;
}

Tensor greedy_ids(const Tensor& logits) {
  ProfileRegion region("sampling");
  return ops::argmax(logits);
}

bool all_plain_greedy(std::span<const SamplingRow> rows) {
  return std::all_of(rows.begin(), rows.end(),
                     [](const SamplingRow& row) { return plain_greedy(*row.params); });
}

SampledBatch greedy_draws(const Tensor& ids) {
  TESSERA_CHECK(ids.dim() == 1 && (ids.dtype() == DType::i32 || ids.dtype() == DType::i64),
                "greedy draws must be ids [rows], got {}", ids.str());
  SampledBatch batch;
  batch.asked_logprobs_.assign(static_cast<size_t>(ids.size(0)), -1);
  if (ids.size(0) == 0) return batch;
  batch.ids_ = ids;
  batch.ids_copy_ = start_readback(ids);
  return batch;
}

SampledBatch execute_and_sample(ModelExecutor& runner, std::span<const SequenceInput> batch,
                                const Tensor& sampled_ids, std::span<const SamplingRow> rows) {
  size_t logits_rows = 0;
  for (const SequenceInput& sequence : batch)
    logits_rows += static_cast<size_t>(sequence.logits_rows);
  TESSERA_CHECK(rows.size() == logits_rows, "{} sampling rows for {} logits rows", rows.size(),
                logits_rows);
  if (all_plain_greedy(rows)) return greedy_draws(runner.execute_greedy(batch, sampled_ids));
  return launch_sampling(runner.execute(batch, sampled_ids), rows);
}

std::vector<SampledToken> SampledBatch::wait() {
  std::vector<SampledToken> tokens(asked_logprobs_.size());
  if (tokens.empty()) return tokens;
  TESSERA_CHECK(ids_copy_ != nullptr, "SampledBatch::wait called twice");
  const void* ids = ids_copy_->wait();
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i].id = ids_.dtype() == DType::i64
                       ? static_cast<int32_t>(static_cast<const int64_t*>(ids)[i])
                       : static_cast<const int32_t*>(ids)[i];
  if (logprobs_copy_) {
    const auto* logprobs = static_cast<const float*>(logprobs_copy_->wait());
    const auto* top_ids = static_cast<const int32_t*>(top_ids_copy_->wait());
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (asked_logprobs_[i] < 0) continue;
      const size_t base = i * static_cast<size_t>(width_ + 1);
      tokens[i].logprob = logprobs[base];
      const int64_t n = std::min(asked_logprobs_[i], vocab_);
      for (int64_t k = 0; k < n; ++k)
        tokens[i].top.push_back({top_ids[i * static_cast<size_t>(width_) + static_cast<size_t>(k)],
                                 logprobs[base + 1 + static_cast<size_t>(k)]});
    }
  }
  ids_copy_.reset();
  logprobs_copy_.reset();
  top_ids_copy_.reset();
  return tokens;
}

std::vector<SampledToken> sample_tokens(const Tensor& logits, std::span<const SamplingRow> rows) {
  return launch_sampling(logits, rows).wait();
}

void take_sampled_ids(const Tensor& token_ids, const Tensor& sampled_ids, Tensor& into) {
  TESSERA_CHECK(sampled_ids.defined() && sampled_ids.device() == token_ids.device() &&
                    into.device() == token_ids.device(),
                "take_sampled_ids: the sampled ids must be on the inputs' device {}",
                token_ids.device().str());
  const Tensor inputs[] = {sampled_ids, token_ids};
  Tensor outputs[] = {into};
  Attributes no_attributes;
  ProfiledLaunch profiled("take_sampled_ids", KernelClass::sampling, [&] {
    return LaunchDetail{static_cast<double>(token_ids.nbytes() * 2 + sampled_ids.nbytes()), 0,
                        fmt::format("{} from {}", token_ids.numel(), sampled_ids.numel())};
  });
  run_kernel("take_sampled_ids", token_ids.device().type,
             KernelArgs{inputs, no_attributes, outputs});
}

SampledToken sample_row(std::span<const float> logits, const SamplingRow& row) {
  Tensor tensor = Tensor::from_floats(logits, {1, static_cast<int64_t>(logits.size())});
  return sample_tokens(tensor, std::span(&row, 1)).at(0);
}

}  // namespace tessera
