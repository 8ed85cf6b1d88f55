// Chat messages to a prompt. Tessera does not run Jinja: it recognizes the common template
// families in a model's tokenizer_config.json (Llama 3, ChatML as in Qwen, Mistral [INST]) and
// renders them natively; any other model gets a plain "role: content" layout.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/tokenizer.h"

namespace tessera {

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

class ChatTemplate {
 public:
  enum class Kind { llama3, chatml, mistral, plain };

  explicit ChatTemplate(Kind kind = Kind::plain) : kind_(kind) {}
  // From tokenizer_config.json beside the model or tokenizer at `path` (a folder or a file in
  // it); plain when there is none or its template is of no known family.
  static ChatTemplate detect(const std::string& path);
  // The family a Jinja template text belongs to (plain when unknown).
  static Kind kind_of(const std::string& jinja);

  Kind kind() const { return kind_; }
  const char* name() const;
  // The prompt's token ids, ending where the assistant's answer begins. Throws tessera::Error
  // naming the message when a role is unknown or the messages are empty.
  std::vector<int32_t> render(const Tokenizer& tokenizer,
                              const std::vector<ChatMessage>& messages) const;
  // Tokens that end an assistant turn in this template (e.g. <|eot_id|>), when the tokenizer has
  // them: the server stops there too.
  std::vector<int32_t> end_of_turn_ids(const Tokenizer& tokenizer) const;

 private:
  Kind kind_;
};

}  // namespace tessera
