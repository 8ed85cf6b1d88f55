#include "engine/server/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/check.h"

namespace tessera {
namespace {

constexpr std::uintmax_t max_config_bytes = 16u << 20;

std::string read_small_regular_file(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return {};
  if (std::filesystem::file_size(path, error) > max_config_bytes || error) return {};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

ChatTemplate::Kind ChatTemplate::kind_of(const std::string& jinja) {
  if (jinja.find("<|start_header_id|>") != std::string::npos) return Kind::llama3;
  if (jinja.find("<|im_start|>") != std::string::npos) return Kind::chatml;
  if (jinja.find("[INST]") != std::string::npos) return Kind::mistral;
  return Kind::plain;
}

ChatTemplate ChatTemplate::detect(const std::string& path) {
  if (path.empty() || path.starts_with("synthetic:")) return ChatTemplate();
  std::filesystem::path folder(path);
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error)) folder = folder.parent_path();
  std::string text = read_small_regular_file(folder / "tokenizer_config.json");
  if (text.empty()) return ChatTemplate();
  nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object() || !config.contains("chat_template")) return ChatTemplate();
  const nlohmann::json& chat = config["chat_template"];
  std::string jinja;
  if (chat.is_string()) jinja = chat.get<std::string>();
  if (chat.is_array())  // [{"name": "default", "template": "..."}, ...]
    for (const nlohmann::json& entry : chat)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        jinja = entry["template"].get<std::string>();
  return ChatTemplate(kind_of(jinja));
}

const char* ChatTemplate::name() const {
  switch (kind_) {
    case Kind::llama3:
      return "llama3";
    case Kind::chatml:
      return "chatml";
    case Kind::mistral:
      return "mistral";
    case Kind::plain:
      return "plain";
  }
  return "plain";
}

namespace {

using OrderedJson = nlohmann::ordered_json;

// JSON as Python's json.dumps writes it (the templates' `tojson`): ", " and ": " between items,
// or one item per line at `indent`.
void python_json(const OrderedJson& value, int indent, int depth, std::string& out) {
  const std::string newline =
      indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string closing =
      indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const char* separator = indent > 0 ? "," : ", ";
  if (value.is_object() && !value.empty()) {
    out += "{";
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      out += (first ? "" : separator) + newline +
             OrderedJson(key).dump(-1, ' ', false, OrderedJson::error_handler_t::replace) + ": ";
      python_json(item, indent, depth + 1, out);
      first = false;
    }
    out += closing + "}";
  } else if (value.is_array() && !value.empty()) {
    out += "[";
    for (size_t i = 0; i < value.size(); ++i) {
      out += (i ? separator : "") + newline;
      python_json(value[i], indent, depth + 1, out);
    }
    out += closing + "]";
  } else {
    out += value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
  }
}

std::string python_json(const OrderedJson& value, int indent = 0) {
  std::string out;
  python_json(value, indent, 0, out);
  return out;
}

// A JSON text as the templates write it; a text that is not JSON stays as it is.
OrderedJson json_or_text(const std::string& text) {
  OrderedJson value = OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
  return value.is_discarded() ? OrderedJson(text) : value;
}

OrderedJson tool_json(const ToolDefinition& tool) {
  OrderedJson function = {{"name", tool.name}};
  if (!tool.description.empty()) function["description"] = tool.description;
  if (!tool.parameters.empty()) function["parameters"] = json_or_text(tool.parameters);
  return {{"type", "function"}, {"function", function}};
}

// Hermes' call: <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
std::string hermes_call(const ToolCall& call) {
  OrderedJson body = {{"name", call.name}, {"arguments", json_or_text(call.arguments)}};
  return "<tool_call>\n" + python_json(body) + "\n</tool_call>";
}

std::string hermes_tools_prompt(const std::vector<ToolDefinition>& tools) {
  std::string text =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
      "provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const ToolDefinition& tool : tools) text += "\n" + python_json(tool_json(tool));
  return text +
         "\n</tools>\n\nFor each function call, return a json object with function name and "
         "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
         "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
}

std::string llama3_text(const std::vector<ChatMessage>& messages,
                        const std::vector<ToolDefinition>& tools) {
  std::string text = "<|begin_of_text|>";
  bool tools_shown = tools.empty();
  for (const ChatMessage& m : messages) {
    const std::string role = m.role == "tool" ? "ipython" : m.role;
    std::string content = m.content;
    if (m.role == "user" && !tools_shown) {
      // Llama 3.1's template puts the tools in the first user message.
      std::string offer =
          "Given the following functions, please respond with a JSON for a function call with "
          "its proper arguments that best answers the given prompt.\n\nRespond in the format "
          "{\"name\": function name, \"parameters\": dictionary of argument name and its "
          "value}.Do not use variables.\n\n";
      for (const ToolDefinition& tool : tools) offer += python_json(tool_json(tool), 4) + "\n\n";
      content = offer + content;
      tools_shown = true;
    }
    for (const ToolCall& call : m.tool_calls)
      content += python_json(
          OrderedJson{{"name", call.name}, {"parameters", json_or_text(call.arguments)}});
    text += "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + content + "<|eot_id|>";
  }
  return text + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

std::string chatml_text(const std::vector<ChatMessage>& messages,
                        const std::vector<ToolDefinition>& tools) {
  std::string text;
  size_t first = 0;
  if (!tools.empty()) {
    std::string system;
    if (messages[0].role == "system") {
      system = messages[0].content + "\n\n";
      first = 1;
    }
    text += "<|im_start|>system\n" + system + hermes_tools_prompt(tools) + "<|im_end|>\n";
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      // Consecutive tool results share one user turn.
      if (i == first || messages[i - 1].role != "tool") text += "<|im_start|>user";
      text += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") text += "<|im_end|>\n";
      continue;
    }
    std::string content = m.content;
    for (size_t c = 0; c < m.tool_calls.size(); ++c)
      content += (content.empty() ? "" : "\n") + hermes_call(m.tool_calls[c]);
    text += "<|im_start|>" + m.role + "\n" + content + "<|im_end|>\n";
  }
  return text + "<|im_start|>assistant\n";
}

std::string mistral_text(const std::vector<ChatMessage>& messages,
                         const std::vector<ToolDefinition>& tools) {
  // The system message goes in front of the first user turn, as Mistral's template does; the
  // tools in front of the last user turn.
  std::string system;
  bool first_user = true;
  size_t last_user = 0;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user") last_user = i;
  std::string text = "<s>";
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n\n") + m.content;
    } else if (m.role == "user") {
      if (i == last_user && !tools.empty()) {
        OrderedJson list = OrderedJson::array();
        for (const ToolDefinition& tool : tools) list.push_back(tool_json(tool));
        text += "[AVAILABLE_TOOLS] " + python_json(list) + "[/AVAILABLE_TOOLS]";
      }
      std::string content = first_user && !system.empty() ? system + "\n\n" + m.content : m.content;
      text += "[INST] " + content + " [/INST]";
      first_user = false;
    } else if (m.role == "tool") {
      text += "[TOOL_RESULTS] " +
              python_json(
                  OrderedJson{{"content", json_or_text(m.content)}, {"call_id", m.tool_call_id}}) +
              "[/TOOL_RESULTS]";
    } else if (!m.tool_calls.empty()) {
      OrderedJson calls = OrderedJson::array();
      for (const ToolCall& call : m.tool_calls)
        calls.push_back(
            {{"name", call.name}, {"arguments", json_or_text(call.arguments)}, {"id", call.id}});
      text += m.content + "[TOOL_CALLS] " + python_json(calls) + "</s>";
    } else {
      text += m.content + "</s>";
    }
  }
  return text;
}

std::string plain_text(const std::vector<ChatMessage>& messages,
                       const std::vector<ToolDefinition>& tools) {
  // No model was trained on this layout: the shortest offer that names the call syntax.
  std::string text;
  if (!tools.empty()) {
    OrderedJson list = OrderedJson::array();
    for (const ToolDefinition& tool : tools) list.push_back(tool_json(tool)["function"]);
    text += "tools: " + list.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) +
            "\ncall one as <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>\n";
  }
  for (const ChatMessage& m : messages) {
    std::string content = m.content;
    for (const ToolCall& call : m.tool_calls)
      content += (content.empty() ? "" : "\n") + hermes_call(call);
    text += m.role + ": " + content + "\n";
  }
  return text + "assistant:";
}

}  // namespace

std::string ChatTemplate::render_text(const std::vector<ChatMessage>& messages,
                                      const std::vector<ToolDefinition>& tools,
                                      bool* add_special) const {
  TESSERA_REQUIRE(!messages.empty(), "messages: at least one message is required");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    TESSERA_REQUIRE(role == "system" || role == "user" || role == "assistant" || role == "tool",
                    "messages[{}].role: '{}' is not one of system, user, assistant, tool", i, role);
  }
  *add_special = kind_ == Kind::plain;  // the other templates write BOS themselves
  switch (kind_) {
    case Kind::llama3:
      return llama3_text(messages, tools);
    case Kind::chatml:
      return chatml_text(messages, tools);
    case Kind::mistral:
      return mistral_text(messages, tools);
    case Kind::plain:
      break;
  }
  return plain_text(messages, tools);
}

std::vector<int32_t> ChatTemplate::render(const Tokenizer& tokenizer,
                                          const std::vector<ChatMessage>& messages,
                                          const std::vector<ToolDefinition>& tools) const {
  bool add_special = false;
  const std::string text = render_text(messages, tools, &add_special);
  return tokenizer.encode(text, add_special);
}

std::vector<int32_t> ChatTemplate::end_of_turn_ids(const Tokenizer& tokenizer) const {
  std::vector<int32_t> ids;
  const char* token = kind_ == Kind::llama3   ? "<|eot_id|>"
                      : kind_ == Kind::chatml ? "<|im_end|>"
                                              : nullptr;
  if (token)
    if (auto id = tokenizer.token_to_id(token)) ids.push_back(*id);
  return ids;
}

}  // namespace tessera
