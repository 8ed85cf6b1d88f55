// Chat messages to a prompt. Tessera does not run Jinja: it recognizes the common template
// families in a model's tokenizer_config.json (Llama 3, ChatML as in Qwen, Mistral [INST]) and
// renders them natively; any other model gets a plain "role: content" layout. Tools, the
// assistant's tool calls and the tool results are rendered as each family's models were trained
// to read them: Llama 3.1's JSON calls with the tools in the first user message and results from
// `ipython`; Qwen's (Hermes) <tools>, <tool_call> and <tool_response> in ChatML; Mistral's
// [AVAILABLE_TOOLS], [TOOL_CALLS] and [TOOL_RESULTS]; the plain layout uses Hermes' tags.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/tokenizer.h"

namespace tessera {

// A function the model may call: OpenAI's {"type": "function", "function": {...}}.
struct ToolDefinition {
  std::string name;
  std::string description;
  std::string parameters;  // a JSON schema's text (properties in the client's order); may be empty
};

// One call of a tool, as the assistant made it.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ChatMessage {
  std::string role;  // system, user, assistant or tool
  std::string content;
  std::vector<ToolCall> tool_calls = {};  // an assistant's
  std::string tool_call_id = {};          // a tool result's: the call it answers
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
  // The prompt's token ids, ending where the assistant's answer begins; `tools` (none when
  // empty) are offered to the model. Throws tessera::Error naming the message when a role is
  // unknown or the messages are empty.
  std::vector<int32_t> render(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                              const std::vector<ToolDefinition>& tools = {}) const;
  // The prompt's text (what render() tokenizes) and whether the tokenizer adds BOS to it.
  std::string render_text(const std::vector<ChatMessage>& messages,
                          const std::vector<ToolDefinition>& tools, bool* add_special) const;
  // Tokens that end an assistant turn in this template (e.g. <|eot_id|>), when the tokenizer has
  // them: the server stops there too.
  std::vector<int32_t> end_of_turn_ids(const Tokenizer& tokenizer) const;

 private:
  Kind kind_;
};

}  // namespace tessera
