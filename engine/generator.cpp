#include "engine/generator.h"

#include <algorithm>

#include "engine/llm_engine.h"
#include "runtime/check.h"

namespace tessera {

double GenerationResult::decode_tokens_per_second() const {
  return decode_seconds > 0 && output_ids.size() > 1
             ? static_cast<double>(output_ids.size() - 1) / decode_seconds
             : 0.0;
}

GenerationResult generate(ModelExecutor& runner, const Tokenizer& tokenizer,
                          const GenerateRequest& request,
                          const std::function<void(const std::string&)>& on_text) {
  GenerationResult result;
  result.prompt_ids = tokenizer.encode(request.prompt, /*add_special=*/true);
  TESSERA_REQUIRE(!result.prompt_ids.empty(),
                  "the prompt encodes to no tokens and the tokenizer has no BOS token; give a "
                  "non-empty prompt");
  // One sequence with the runner's token budget; nothing to share a prefix with.
  EngineConfig config;
  config.scheduler = runner.config().scheduler;
  config.scheduler.max_num_seqs = 1;
  config.scheduler.async_scheduling =
      request.async_scheduling.value_or(config.scheduler.async_scheduling);
  config.cache.enable_prefix_caching = false;
  config.speculative = request.speculative;
  LLMEngine engine(runner, tokenizer, config);
  const int64_t max_length = engine.max_model_len();
  const int64_t prompt_length = static_cast<int64_t>(result.prompt_ids.size());
  TESSERA_REQUIRE(prompt_length < max_length,
                  "the prompt has {} tokens; the model's maximum length is {}", prompt_length,
                  max_length);
  SamplingParams sampling = request.sampling;
  sampling.max_tokens = std::min(sampling.max_tokens, max_length - prompt_length);
  if (!request.stop_token_ids.empty()) {
    sampling.ignore_eos = true;
    sampling.stop_token_ids = request.stop_token_ids;
  }
  const auto start = Clock::now();
  auto first_token = start;
  engine.add_request("generate", result.prompt_ids, sampling);
  while (engine.has_unfinished()) {
    for (const RequestOutput& output : engine.step()) {
      if (result.output_ids.empty() && !output.token_ids.empty()) first_token = Clock::now();
      result.output_ids.insert(result.output_ids.end(), output.token_ids.begin(),
                               output.token_ids.end());
      result.text += output.text;
      if (on_text && !output.text.empty()) on_text(output.text);
      if (output.finished()) {
        TESSERA_REQUIRE(output.finish_reason != FinishReason::error, "generation failed: {}",
                        output.error);
        result.finish_reason = finish_reason_name(output.finish_reason);
      }
    }
  }
  result.prefill_seconds = std::chrono::duration<double>(first_token - start).count();
  result.decode_seconds = std::chrono::duration<double>(Clock::now() - first_token).count();
  const EngineMetrics metrics = engine.metrics().snapshot();
  result.drafts = metrics.spec_decode_drafts;
  result.draft_tokens = metrics.spec_decode_draft_tokens;
  result.accepted_tokens = metrics.spec_decode_accepted_tokens;
  return result;
}

}  // namespace tessera
