#include "engine/server/tool_call_extractor.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "runtime/mix64.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

Json parse_json(std::string_view text) {
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\n\r");
  if (first == std::string_view::npos) return "";
  const size_t last = text.find_last_not_of(" \t\n\r");
  return std::string(text.substr(first, last - first + 1));
}

// The longest suffix of `text` that is a proper prefix of `marker`: it may start the marker.
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t length = std::min(text.size(), marker.size() - 1); length > 0; --length)
    if (text.substr(text.size() - length) == marker.substr(0, length)) return length;
  return 0;
}

}  // namespace

ToolCallExtractor::ToolCallExtractor(const ChatTools& tools, ChatTemplate::Kind kind,
                                     std::string call_ids)
    : tools_(tools), kind_(kind), call_ids_(std::move(call_ids)) {
  if (tools_.choice != ChatTools::Choice::automatic) {
    in_calls_ = true;  // the grammar made the whole output a call
    return;
  }
  marker_ = kind == ChatTemplate::Kind::mistral  ? "[TOOL_CALLS]"
            : kind == ChatTemplate::Kind::llama3 ? ""
                                                 : std::string(kHermesOpen);
}

std::string ToolCallExtractor::push(std::string_view text) {
  if (in_calls_) {
    held_ += text;
    return "";
  }
  held_ += text;
  if (marker_.empty()) {
    // Llama 3: the output is calls when it starts (past whitespace) with '{' or the python tag.
    if (shown_.empty()) {
      const std::string start = trimmed(held_);
      if (start.empty()) return "";  // only whitespace so far
      if (start.size() < kPythonTag.size() && kPythonTag.starts_with(start)) return "";
      if (start[0] == '{' || start.starts_with(kPythonTag)) {
        in_calls_ = true;
        return "";
      }
    }
    std::string out = std::move(held_);
    held_.clear();
    shown_ += out;
    return out;
  }
  const size_t at = held_.find(marker_);
  if (at != std::string::npos) {
    std::string out = held_.substr(0, at);
    held_ = held_.substr(at);
    in_calls_ = true;
    shown_ += out;
    return out;
  }
  const size_t keep = partial_marker(held_, marker_);
  std::string out = held_.substr(0, held_.size() - keep);
  held_ = held_.substr(held_.size() - keep);
  shown_ += out;
  return out;
}

ToolCall ToolCallExtractor::make_call(const std::string& name, const std::string& arguments) const {
  const uint64_t hash = mix64(std::hash<std::string>{}(call_ids_) ^ mix64(next_call_++));
  return ToolCall{fmt::format("call_{:016x}", hash), name, arguments};
}

std::vector<ToolCall> ToolCallExtractor::parse_calls(const std::string& text) const {
  std::vector<ToolCall> calls;
  auto offered = [&](const Json& name) {
    if (!name.is_string()) return false;
    for (const ToolDefinition& tool : tools_.tools)
      if (tool.name == name.get<std::string>()) return true;
    return false;
  };
  // {"name": ..., "<arguments_key>": {...}} to a call, when it is one of an offered tool.
  auto add = [&](const Json& call, std::initializer_list<const char*> argument_keys) {
    if (!call.is_object() || !offered(call.value("name", Json()))) return false;
    for (const char* key : argument_keys)
      if (call.contains(key) && call[key].is_object()) {
        calls.push_back(make_call(call["name"].get<std::string>(), call[key].dump()));
        return true;
      }
    return false;
  };
  if (tools_.choice == ChatTools::Choice::named) {
    const Json arguments = parse_json(text);
    if (arguments.is_object()) calls.push_back(make_call(tools_.named, arguments.dump()));
    return calls;
  }
  if (tools_.choice == ChatTools::Choice::required) {
    const Json list = parse_json(text);
    if (list.is_array())
      for (const Json& call : list)
        if (!add(call, {"parameters"})) return {};
    return calls;
  }
  if (kind_ == ChatTemplate::Kind::mistral) {
    const Json list = parse_json(trimmed(std::string_view(text).substr(marker_.size())));
    if (list.is_array())
      for (const Json& call : list)
        if (!add(call, {"arguments"})) return {};
    return calls;
  }
  if (kind_ == ChatTemplate::Kind::llama3) {
    std::string body = trimmed(text);
    if (body.starts_with(kPythonTag))
      body = trimmed(std::string_view(body).substr(kPythonTag.size()));
    // Calls joined by ";" (a ';' inside a string would split one: then it does not parse).
    size_t start = 0;
    while (start <= body.size()) {
      size_t end = body.find(';', start);
      if (end == std::string::npos) end = body.size();
      const std::string piece = trimmed(std::string_view(body).substr(start, end - start));
      if (!piece.empty() && !add(parse_json(piece), {"parameters", "arguments"})) return {};
      start = end + 1;
    }
    return calls;
  }
  // Hermes: every <tool_call> block; anything else between them must be whitespace.
  size_t at = 0;
  while (true) {
    const size_t open = text.find(kHermesOpen, at);
    if (open == std::string::npos) {
      if (!trimmed(std::string_view(text).substr(at)).empty()) return {};
      break;
    }
    if (!trimmed(std::string_view(text).substr(at, open - at)).empty()) return {};
    const size_t close = text.find(kHermesClose, open);
    if (close == std::string::npos) return {};
    const size_t inside = open + kHermesOpen.size();
    if (!add(parse_json(trimmed(std::string_view(text).substr(inside, close - inside))),
             {"arguments"}))
      return {};
    at = close + kHermesClose.size();
  }
  return calls;
}

ToolCallExtractor::Result ToolCallExtractor::finish() {
  Result result;
  std::string held = std::move(held_);
  held_.clear();
  if (!in_calls_) {
    result.content = std::move(held);
    return result;
  }
  result.calls = parse_calls(held);
  if (result.calls.empty()) {
    result.content = std::move(held);  // not calls after all: the text is the answer
    return result;
  }
  if (!tools_.parallel) result.calls.resize(1);
  return result;
}

}  // namespace tessera
