// One prompt to one completion: an LLMEngine with one request, stepped until it finishes,
// streaming text as it becomes valid UTF-8. Stops at an end token, a stop string, max_tokens
// (clamped to what the model's length leaves), or the model's maximum length.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/runner/model_runner.h"
#include "engine/sampling_params.h"
#include "models/tokenizer.h"

namespace tessera {

struct GenerationResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::string text;
  std::string
      finish_reason;  // "stop" (end token, stop string), "length" (max_tokens, model length)
  double prefill_seconds = 0;
  double decode_seconds = 0;
  // Speculative decoding: proposals verified, the tokens they held, and those accepted.
  int64_t drafts = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  double decode_tokens_per_second() const;
};

struct GenerateRequest {
  std::string prompt;
  SamplingParams sampling;
  // Stop when the model emits one of these instead of the tokenizer's end tokens (when given).
  std::vector<int32_t> stop_token_ids;
  std::optional<bool> async_scheduling;  // unset: the runner's engine.async_scheduling
  // Speculative decoding (the runner must score its logits rows: make_runner_config).
  SpeculativeConfig speculative;
};

GenerationResult generate(ModelExecutor& runner, const Tokenizer& tokenizer,
                          const GenerateRequest& request,
                          const std::function<void(const std::string&)>& on_text = {});

}  // namespace tessera
