// Finds an assistant's tool calls in its output text, as the text streams in, so that no part of
// a call is ever sent as content. With tool_choice "auto" the family's own syntax is looked for:
// Hermes' <tool_call>{"name", "arguments"}</tool_call> (ChatML, plain), Mistral's [TOOL_CALLS]
// followed by a JSON list, Llama 3's output that is JSON {"name", "parameters"} (several joined
// by ";", after an optional <|python_tag|>). With "required" or a named function the grammar made
// the whole output a JSON list of calls, or the arguments. Text that does not parse as calls of
// offered tools is returned as content.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/server/chat_template.h"
#include "engine/server/chat_tools.h"

namespace tessera {

class ToolCallExtractor {
 public:
  // `call_ids`: a prefix for the calls' ids (unique per choice).
  ToolCallExtractor(const ChatTools& tools, ChatTemplate::Kind kind, std::string call_ids);

  // The content that may be shown now.
  std::string push(std::string_view text);
  struct Result {
    std::string content;  // held back and now known to be content
    std::vector<ToolCall> calls;
  };
  // At the end of the output.
  Result finish();

 private:
  std::vector<ToolCall> parse_calls(const std::string& text) const;
  ToolCall make_call(const std::string& name, const std::string& arguments) const;

  const ChatTools& tools_;
  ChatTemplate::Kind kind_;
  std::string call_ids_;
  std::string marker_;  // what starts the calls in "auto" ("" where the whole text is)
  std::string shown_;   // content sent so far (Llama 3: whether the output began)
  std::string held_;    // text that may be or is part of calls
  bool in_calls_ = false;
  mutable size_t next_call_ = 0;
};

}  // namespace tessera
