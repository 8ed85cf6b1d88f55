#include "engine/server/chat_tools.h"

#include <fmt/format.h>

#include "engine/server/openai_protocol.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

ApiError bad(const std::string& field, const std::string& message) {
  return ApiError(400, fmt::format("{}: {}", field, message), field);
}

// A tool's parameters embedded in a larger schema: its local references ("#/$defs/x") must point
// below where it now sits.
Json embedded(Json schema, const std::string& location) {
  if (schema.is_object()) {
    for (auto& [key, value] : schema.items()) {
      if (key == "$ref" && value.is_string() && value.get<std::string>().starts_with("#"))
        value = "#" + location + value.get<std::string>().substr(1);
      else
        value = embedded(std::move(value), location);
    }
  } else if (schema.is_array()) {
    for (Json& item : schema) item = embedded(std::move(item), location);
  }
  return schema;
}

Json parameters_of(const ToolDefinition& tool) {
  return tool.parameters.empty() ? Json{{"type", "object"}} : Json::parse(tool.parameters);
}

}  // namespace

ChatTools parse_chat_tools(const Json& body) {
  ChatTools result;
  auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  if (given("tools")) {
    const Json& tools = body["tools"];
    if (!tools.is_array()) throw bad("tools", "must be a list of tools");
    for (size_t i = 0; i < tools.size(); ++i) {
      const std::string where = fmt::format("tools[{}]", i);
      const Json& tool = tools[i];
      if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("function") ||
          !tool["function"].is_object())
        throw bad(where, "must be {\"type\": \"function\", \"function\": {...}}");
      const Json& function = tool["function"];
      for (const auto& [key, unused] : function.items())
        if (key != "name" && key != "description" && key != "parameters" && key != "strict")
          throw bad(where + ".function", fmt::format("unknown key '{}'", key));
      if (!function.contains("name") || !function["name"].is_string() ||
          function["name"].get<std::string>().empty())
        throw bad(where + ".function.name", "a function needs a name");
      ToolDefinition definition;
      definition.name = function["name"].get<std::string>();
      for (const ToolDefinition& other : result.tools)
        if (other.name == definition.name)
          throw bad(where + ".function.name",
                    fmt::format("'{}' is offered twice", definition.name));
      if (function.contains("description") && !function["description"].is_null()) {
        if (!function["description"].is_string())
          throw bad(where + ".function.description", "must be a string");
        definition.description = function["description"].get<std::string>();
      }
      if (function.contains("parameters") && !function["parameters"].is_null()) {
        if (!function["parameters"].is_object())
          throw bad(where + ".function.parameters", "must be a JSON schema object");
        definition.parameters = function["parameters"].dump();
      }
      if (function.contains("strict") && !function["strict"].is_boolean() &&
          !function["strict"].is_null())
        throw bad(where + ".function.strict", "must be a boolean");
      result.tools.push_back(std::move(definition));
    }
  }
  result.choice = result.tools.empty() ? ChatTools::Choice::none : ChatTools::Choice::automatic;
  if (given("tool_choice")) {
    const Json& choice = body["tool_choice"];
    if (choice.is_string()) {
      const std::string mode = choice.get<std::string>();
      if (mode == "none") {
        result.choice = ChatTools::Choice::none;
      } else if (mode == "auto" || mode == "required") {
        if (result.tools.empty()) throw bad("tool_choice", fmt::format("'{}' needs 'tools'", mode));
        result.choice = mode == "auto" ? ChatTools::Choice::automatic : ChatTools::Choice::required;
      } else {
        throw bad("tool_choice", fmt::format("'{}' is not one of none, auto, required", mode));
      }
    } else if (choice.is_object() && choice.value("type", "") == "function" &&
               choice.contains("function") && choice["function"].is_object() &&
               choice["function"].contains("name") && choice["function"]["name"].is_string()) {
      result.named = choice["function"]["name"].get<std::string>();
      bool offered = false;
      for (const ToolDefinition& tool : result.tools) offered |= tool.name == result.named;
      if (!offered)
        throw bad("tool_choice",
                  fmt::format("the function '{}' is not among 'tools'", result.named));
      result.choice = ChatTools::Choice::named;
    } else {
      throw bad("tool_choice",
                "must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": "
                "...}}");
    }
  }
  if (given("parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean())
      throw bad("parallel_tool_calls", "must be a boolean");
    result.parallel = body["parallel_tool_calls"].get<bool>();
  }
  return result;
}

std::optional<OutputConstraint> tool_call_constraint(const ChatTools& tools) {
  OutputConstraint constraint;
  constraint.kind = OutputConstraint::Kind::json_schema;
  if (tools.choice == ChatTools::Choice::named) {
    for (const ToolDefinition& tool : tools.tools)
      if (tool.name == tools.named) constraint.text = parameters_of(tool).dump();
    constraint.field = "tools";
    return constraint;
  }
  if (tools.choice != ChatTools::Choice::required) return std::nullopt;
  Json options = Json::array();
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    const std::string location = fmt::format("/items/anyOf/{}/properties/parameters", i);
    options.push_back({{"type", "object"},
                       {"properties",
                        {{"name", {{"const", tools.tools[i].name}}},
                         {"parameters", embedded(parameters_of(tools.tools[i]), location)}}},
                       {"required", {"name", "parameters"}},
                       {"additionalProperties", false}});
  }
  Json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", options}}}};
  if (!tools.parallel) schema["maxItems"] = 1;
  constraint.text = schema.dump();
  constraint.field = "tools";
  return constraint;
}

}  // namespace tessera
