#include "engine/server/choice_fan_out.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/llm_engine.h"

namespace tessera {

std::vector<ChoiceRequest> fan_out_choices(const CompletionRequest& request,
                                           const std::string& response_id, int64_t max_model_len) {
  std::vector<ChoiceRequest> choices;
  for (size_t prompt = 0; prompt < request.prompts.size(); ++prompt) {
    const int64_t room = max_model_len - static_cast<int64_t>(request.prompts[prompt].size());
    for (int64_t i = 0; i < request.params.n; ++i) {
      SamplingParams params = request.params;
      params.n = 1;
      if (params.seed) params.seed = derive_seed(*params.seed, static_cast<uint64_t>(i));
      if (!request.max_tokens_given)
        params.max_tokens = request.chat ? room : std::min(default_completion_max_tokens, room);
      choices.push_back({fmt::format("{}-{}", response_id, choices.size()), prompt, params});
    }
  }
  return choices;
}

}  // namespace tessera
