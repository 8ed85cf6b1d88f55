#include "engine/server/completion_parser.h"

#include <fmt/format.h>

#include "engine/server/chat_tools.h"
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
  const nlohmann::json parsed = parse_request_body(body);
  // Tools and output constraints are read again from an ordered parse, only when one may be
  // there: schemas keep their properties' order, which is the order the model writes them in.
  bool ordered_needed = false;
  for (const char* field : kOutputConstraintFields)
    ordered_needed |= body.find(field) != std::string::npos;
  for (const char* field : kChatToolFields)
    ordered_needed |= chat && body.find(field) != std::string::npos;
  nlohmann::ordered_json ordered;
  if (ordered_needed) ordered = nlohmann::ordered_json::parse(body);
  ChatTools tools;
  if (chat && ordered_needed) tools = parse_chat_tools(ordered);
  CompletionRequest request =
      parse_completion_request(parsed, chat, tokenizer_, chat_template_, limits_,
                               tools.active() ? tools.tools : std::vector<ToolDefinition>{});
  if (request.model != served_model_name_)
    throw ApiError(404, fmt::format("The model `{}` does not exist.", request.model), "model",
                   "invalid_request_error", "model_not_found");
  if (ordered_needed) request.constraint = parse_output_constraint(ordered);
  if (tools.active()) {
    if (request.constraint)
      throw ApiError(400,
                     fmt::format("tool_choice: tools and '{}' together are not supported; use "
                                 "tool_choice none, or no output constraint",
                                 request.constraint->field),
                     "tool_choice");
    request.constraint = tool_call_constraint(tools);
    // Mistral's [TOOL_CALLS] is a special token: the text must keep it to be found.
    if (tools.choice == ChatTools::Choice::automatic &&
        chat_template_.kind() == ChatTemplate::Kind::mistral)
      request.params.skip_special_tokens = false;
  }
  request.tools = std::move(tools);
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
