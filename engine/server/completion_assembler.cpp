#include "engine/server/completion_assembler.h"

namespace tessera {

CompletionAssembler::CompletionAssembler(ResponseContext context,
                                         const std::vector<std::string>& request_ids,
                                         int64_t prompt_tokens)
    : context_(std::move(context)), choices_(request_ids.size()), prompt_tokens_(prompt_tokens) {
  for (size_t i = 0; i < request_ids.size(); ++i) index_of_[request_ids[i]] = i;
  extractors_.resize(request_ids.size());
  if (context_.tools)
    for (size_t i = 0; i < request_ids.size(); ++i)
      extractors_[i].emplace(*context_.tools, context_.template_kind, request_ids[i]);
}

size_t CompletionAssembler::record(const RequestOutput& output) {
  const size_t index = index_of_.at(output.request_id);
  ChoiceState& choice = choices_[index];
  last_shown_ = Shown{output.text, {}};
  if (extractors_[index]) {
    last_shown_.text = extractors_[index]->push(output.text);
    if (output.finished()) {
      ToolCallExtractor::Result result = extractors_[index]->finish();
      last_shown_.text += result.content;
      last_shown_.tool_calls = std::move(result.calls);
      choice.tool_calls = last_shown_.tool_calls;
    }
  }
  choice.text += last_shown_.text;
  choice.token_ids.insert(choice.token_ids.end(), output.token_ids.begin(), output.token_ids.end());
  choice.logprobs.insert(choice.logprobs.end(), output.logprobs.begin(), output.logprobs.end());
  if (output.finished()) {
    choice.finish_reason = output.finish_reason;
    choice.stop_reason = output.stop_reason;
    ++finished_;
    completion_tokens_ += output.completion_tokens;
    cached_tokens_ += output.cached_tokens;
    if (output.finish_reason == FinishReason::error && error_.empty()) error_ = output.error;
  }
  return index;
}

nlohmann::json CompletionAssembler::usage() const {
  return usage_json(prompt_tokens_, completion_tokens_, cached_tokens_);
}

bool CompletionAssembler::write_body(const std::function<bool(std::string_view)>& sink) const {
  if (!error_.empty()) return sink(dump_json(failed_request_error(error_).body()));
  if (!sink("{\"choices\":[")) return false;
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (i > 0 && !sink(",")) return false;
    if (!sink(dump_json(completion_choice(context_, i, choices_[i])))) return false;
  }
  // The envelope's members follow the list: "]," then its text without the opening brace.
  const std::string envelope = dump_json(completion_envelope(context_, usage()));
  return sink("],") && sink(std::string_view(envelope).substr(1));
}

std::string CompletionAssembler::final_body() const {
  std::string body;
  write_body([&](std::string_view piece) {
    body += piece;
    return true;
  });
  return body;
}

ApiError failed_request_error(const std::string& engine_error) {
  return ApiError(500, "the request failed: " + engine_error, "", "internal_error");
}

}  // namespace tessera
