#include "engine/server/completion_parser.h"

#include <fmt/format.h>

#include "engine/server/output_constraint_fields.h"
#include "runtime/check.h"

namespace tessera {

CompletionParser::CompletionParser(const Tokenizer& tokenizer, ChatTemplate chat_template,
                                   PromptLimits limits, std::string served_model_name)
    : tokenizer_(tokenizer),
      chat_template_(std::move(chat_template)),
      limits_(limits),
      served_model_name_(std::move(served_model_name)),
      grammars_(std::make_shared<GrammarCompiler>(tokenizer, limits_.logits_width)) {}

CompletionRequest CompletionParser::parse(const std::string& body, bool chat) const {
  CompletionRequest request =
      parse_completion_request(parse_request_body(body), chat, tokenizer_, chat_template_, limits_);
  if (request.model != served_model_name_)
    throw ApiError(404, fmt::format("The model `{}` does not exist.", request.model), "model",
                   "invalid_request_error", "model_not_found");
  // The constraint fields are read again from an ordered parse, only when one may be there: a
  // schema's properties keep their order.
  bool may_constrain = false;
  for (const char* field : kOutputConstraintFields)
    may_constrain |= body.find(field) != std::string::npos;
  if (may_constrain)
    request.constraint = parse_output_constraint(nlohmann::ordered_json::parse(body));
  if (request.constraint) {
    try {
      request.params.grammar =
          grammars_->compile(*request.constraint, &request.grammar_compile_seconds);
    } catch (const Error& error) {
      throw ApiError(400, error.what(), request.constraint->field);
    }
  }
  return request;
}

}  // namespace tessera
