#include "engine/server/completion_parser.h"

#include <fmt/format.h>

namespace tessera {

CompletionParser::CompletionParser(const Tokenizer& tokenizer, ChatTemplate chat_template,
                                   PromptLimits limits, std::string served_model_name)
    : tokenizer_(tokenizer),
      chat_template_(std::move(chat_template)),
      limits_(limits),
      served_model_name_(std::move(served_model_name)) {}

CompletionRequest CompletionParser::parse(const std::string& body, bool chat) const {
  CompletionRequest request =
      parse_completion_request(parse_request_body(body), chat, tokenizer_, chat_template_, limits_);
  if (request.model != served_model_name_)
    throw ApiError(404, fmt::format("The model `{}` does not exist.", request.model), "model",
                   "invalid_request_error", "model_not_found");
  return request;
}

}  // namespace tessera
