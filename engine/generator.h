// One prompt to one completion through the model runner: prefill the prompt in one step, then
// decode a token per step, streaming text as it becomes valid UTF-8. Stops at an end-of-sequence
// token, max_tokens, or the model's maximum length. For its one sequence it is the scheduler: it
// holds the runner's KV-cache blocks in a KVCacheManager for the length of the call.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "models/tokenizer.h"

namespace tessera {

struct GenerationResult {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::string text;
  std::string finish_reason;  // "stop" (end token), "length" (max_tokens or model length)
  double prefill_seconds = 0;
  double decode_seconds = 0;
  double decode_tokens_per_second() const;
};

struct GenerateRequest {
  std::string prompt;
  SamplingParams sampling;
  // Stop when the model emits one of these (default: the tokenizer's end tokens).
  std::vector<int32_t> stop_token_ids;
};

GenerationResult generate(ModelRunner& runner, const Tokenizer& tokenizer,
                          const GenerateRequest& request,
                          const std::function<void(const std::string&)>& on_text = {});

}  // namespace tessera
