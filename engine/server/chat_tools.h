// Tool calling on the chat route: the request's `tools`, `tool_choice` and
// `parallel_tool_calls`, and what tool_choice asks of the output. "auto" lets the model answer or
// call (its calls are found in the text by ToolCallExtractor); "required" and a named function
// constrain the output with a grammar, as vLLM does: a JSON array of calls
// [{"name": ..., "parameters": {...}}] (one call when parallel_tool_calls is false), or the named
// function's arguments. "none" offers no tools.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/server/chat_template.h"
#include "engine/structured_output/grammar_compiler.h"

namespace tessera {

struct ChatTools {
  enum class Choice { none, automatic, required, named };
  std::vector<ToolDefinition> tools;
  Choice choice = Choice::none;
  std::string named;     // Choice::named: the function
  bool parallel = true;  // parallel_tool_calls
  // Whether tools are offered to the model and its calls returned.
  bool active() const { return !tools.empty() && choice != Choice::none; }
};

// The fields a chat request may carry for tools.
inline constexpr const char* kChatToolFields[] = {"tools", "tool_choice", "parallel_tool_calls"};

// Throws ApiError (400) naming the field: a tool without a name or with parameters that are not
// an object, a tool_choice naming no offered tool, tool_choice without tools.
ChatTools parse_chat_tools(const nlohmann::ordered_json& body);
// The output constraint of tool_choice "required" or a named function; none otherwise.
std::optional<OutputConstraint> tool_call_constraint(const ChatTools& tools);

}  // namespace tessera
