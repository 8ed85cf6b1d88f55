// Request parsing and validation for the completion routes: a POST body becomes a typed
// CompletionRequest for the served model, or an ApiError naming the field (the field-by-field
// rules are openai_protocol.h's).
#pragma once

#include <memory>
#include <string>

#include "engine/server/chat_template.h"
#include "engine/server/openai_protocol.h"
#include "engine/structured_output/grammar_compiler.h"
#include "models/tokenizer.h"

namespace tessera {

class CompletionParser {
 public:
  CompletionParser(const Tokenizer& tokenizer, ChatTemplate chat_template, PromptLimits limits,
                   std::string served_model_name);

  // /v1/completions (chat = false) or /v1/chat/completions (chat = true). Throws ApiError: 400 for
  // a bad body or field, 404 when the request names another model than the served one. An
  // output constraint is compiled here (params.grammar), on the handler's thread.
  CompletionRequest parse(const std::string& body, bool chat) const;

  const PromptLimits& limits() const { return limits_; }
  ChatTemplate::Kind template_kind() const { return chat_template_.kind(); }
  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  const Tokenizer& tokenizer_;
  ChatTemplate chat_template_;
  PromptLimits limits_;
  std::string served_model_name_;
  std::shared_ptr<GrammarCompiler> grammars_;  // shared by the copies of this parser
};

}  // namespace tessera
