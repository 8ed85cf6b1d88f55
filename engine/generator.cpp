#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "kernels/check.h"

namespace tessera {

double GenerationResult::decode_tokens_per_second() const {
  return decode_seconds > 0 && output_ids.size() > 1
             ? static_cast<double>(output_ids.size() - 1) / decode_seconds
             : 0.0;
}

GenerationResult generate(ModelRunner& runner, const Tokenizer& tokenizer,
                          const GenerateRequest& request,
                          const std::function<void(const std::string&)>& on_text) {
  using Clock = std::chrono::steady_clock;
  GenerationResult result;
  result.prompt_ids = tokenizer.encode(request.prompt, /*add_special=*/true);
  TESSERA_REQUIRE(!result.prompt_ids.empty(),
                  "the prompt encodes to no tokens and the tokenizer has no BOS token; give a "
                  "non-empty prompt");
  int64_t max_length = runner.model().max_positions();
  TESSERA_REQUIRE(static_cast<int64_t>(result.prompt_ids.size()) < max_length,
                  "the prompt has {} tokens; the model's maximum length is {}",
                  result.prompt_ids.size(), max_length);
  std::vector<int32_t> stop =
      request.stop_token_ids.empty() ? tokenizer.eos_ids() : request.stop_token_ids;
  Sampler sampler(request.sampling);
  StreamingDecoder decoder(tokenizer, result.prompt_ids);  // the prompt is the text's context
  // The generator schedules one sequence, so it owns the blocks: the runner's whole cache.
  KVCacheManager blocks(runner.num_kv_blocks(), runner.options().block_size);
  const SequenceId sequence = 0;
  std::vector<int32_t> pending = result.prompt_ids;
  int64_t cached = 0;
  auto step_start = Clock::now();
  result.finish_reason = "length";
  const int64_t chunk = std::max<int64_t>(runner.options().max_num_batched_tokens, 1);
  while (true) {
    // Chunked prefill: a prompt longer than the step budget goes in several steps.
    Tensor logits;
    for (size_t start = 0; start < pending.size(); start += static_cast<size_t>(chunk)) {
      size_t count = std::min(pending.size() - start, static_cast<size_t>(chunk));
      int64_t total = cached + static_cast<int64_t>(count);
      blocks.allocate(sequence, total);
      SequenceInput input{std::span(pending).subspan(start, count), cached,
                          blocks.block_table(sequence)};
      logits = runner.execute(std::span(&input, 1));
      cached = total;
    }
    int32_t next = sampler.sample(logits, 0);
    auto now = Clock::now();
    double seconds = std::chrono::duration<double>(now - step_start).count();
    (result.output_ids.empty() ? result.prefill_seconds : result.decode_seconds) += seconds;
    step_start = now;
    result.output_ids.push_back(next);
    if (std::find(stop.begin(), stop.end(), next) != stop.end()) {
      result.finish_reason = "stop";
      break;
    }
    std::string piece = decoder.push(next);
    result.text += piece;
    if (on_text && !piece.empty()) on_text(piece);
    if (static_cast<int64_t>(result.output_ids.size()) >= request.sampling.max_tokens ||
        cached + 1 >= max_length)
      break;
    pending = {next};
  }
  std::string rest = decoder.finish();
  result.text += rest;
  if (on_text && !rest.empty()) on_text(rest);
  return result;
}

}  // namespace tessera
