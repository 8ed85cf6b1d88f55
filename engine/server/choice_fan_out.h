// Fan-out of `n`: a completion request becomes one engine request per prompt and choice, each
// sampling one sequence (n = 1) with its own seed, derived from the request's so that choices
// differ from each other yet repeat from call to call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "engine/server/openai_protocol.h"

namespace tessera {

// OpenAI's max_tokens when /v1/completions does not give one; chat fills the model's length.
constexpr int64_t default_completion_max_tokens = 16;

struct ChoiceRequest {
  std::string id;       // RESPONSE_ID-INDEX, INDEX counting choices over all prompts
  size_t prompt_index;  // into CompletionRequest::prompts
  SamplingParams params;
};

// Choices in response order: prompt by prompt, n for each.
std::vector<ChoiceRequest> fan_out_choices(const CompletionRequest& request,
                                           const std::string& response_id, int64_t max_model_len);

}  // namespace tessera
