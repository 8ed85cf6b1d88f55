#include "engine/server/output_constraint_fields.h"

#include <fmt/format.h>

#include <vector>

#include "engine/server/openai_protocol.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

ApiError bad(const std::string& field, const std::string& message) {
  return ApiError(400, fmt::format("{}: {}", field, message), field);
}

std::string string_of(const Json& value, const std::string& field) {
  if (!value.is_string()) throw bad(field, "must be a string");
  return value.get<std::string>();
}

// A schema given as an object (or true/false), or as JSON text.
std::string schema_text(const Json& value, const std::string& field) {
  if (value.is_object() || value.is_boolean()) return value.dump();
  if (value.is_string()) {
    try {
      const Json parsed = Json::parse(value.get<std::string>());
      if (parsed.is_object() || parsed.is_boolean()) return parsed.dump();
    } catch (const std::exception&) {
    }
    throw bad(field, "a schema given as a string must hold a JSON object");
  }
  throw bad(field, "must be a JSON schema (an object)");
}

OutputConstraint make(OutputConstraint::Kind kind, std::string text, std::string field) {
  OutputConstraint constraint;
  constraint.kind = kind;
  constraint.text = std::move(text);
  constraint.field = std::move(field);
  return constraint;
}

OutputConstraint choices(const Json& value, const std::string& field) {
  if (!value.is_array() || value.empty()) throw bad(field, "must be a non-empty list of strings");
  OutputConstraint constraint = make(OutputConstraint::Kind::choice, "", field);
  for (size_t i = 0; i < value.size(); ++i)
    constraint.choices.push_back(string_of(value[i], fmt::format("{}[{}]", field, i)));
  return constraint;
}

std::optional<OutputConstraint> response_format(const Json& format) {
  if (!format.is_object() || !format.contains("type"))
    throw bad("response_format", "must be an object with a 'type'");
  for (const auto& [key, unused] : format.items())
    if (key != "type" && key != "json_schema")
      throw bad("response_format", fmt::format("unknown key '{}'", key));
  const std::string type = string_of(format["type"], "response_format.type");
  if (type == "text") return std::nullopt;
  if (type == "json_object")
    return make(OutputConstraint::Kind::json_object, "", "response_format");
  if (type != "json_schema")
    throw bad("response_format.type",
              fmt::format("'{}' is not one of text, json_object, json_schema", type));
  if (!format.contains("json_schema") || !format["json_schema"].is_object())
    throw bad("response_format.json_schema", "type json_schema needs a 'json_schema' object");
  const Json& wrapper = format["json_schema"];
  for (const auto& [key, value] : wrapper.items()) {
    if (key == "name" || key == "description") {
      string_of(value, "response_format.json_schema." + key);
    } else if (key == "strict") {
      if (!value.is_boolean() && !value.is_null())
        throw bad("response_format.json_schema.strict", "must be a boolean");
    } else if (key != "schema") {
      throw bad("response_format.json_schema", fmt::format("unknown key '{}'", key));
    }
  }
  if (!wrapper.contains("schema"))
    throw bad("response_format.json_schema.schema", "the schema is missing");
  return make(OutputConstraint::Kind::json_schema,
              schema_text(wrapper["schema"], "response_format.json_schema.schema"),
              "response_format.json_schema.schema");
}

std::vector<OutputConstraint> structured_outputs(const Json& options) {
  if (!options.is_object()) throw bad("structured_outputs", "must be an object");
  std::vector<OutputConstraint> found;
  for (const auto& [key, value] : options.items()) {
    const std::string field = "structured_outputs." + key;
    if (value.is_null()) continue;
    if (key == "json") {
      found.push_back(make(OutputConstraint::Kind::json_schema, schema_text(value, field), field));
    } else if (key == "regex") {
      found.push_back(make(OutputConstraint::Kind::regex, string_of(value, field), field));
    } else if (key == "grammar") {
      found.push_back(make(OutputConstraint::Kind::grammar, string_of(value, field), field));
    } else if (key == "choice") {
      found.push_back(choices(value, field));
    } else if (key == "json_object") {
      if (!value.is_boolean()) throw bad(field, "must be a boolean");
      if (value.get<bool>()) found.push_back(make(OutputConstraint::Kind::json_object, "", field));
    } else {
      throw bad(field, "is not supported (json, regex, choice, grammar, json_object)");
    }
  }
  return found;
}

}  // namespace

std::optional<OutputConstraint> parse_output_constraint(const Json& body) {
  std::vector<OutputConstraint> found;
  auto given = [&](const char* key) { return body.contains(key) && !body[key].is_null(); };
  if (given("response_format"))
    if (std::optional<OutputConstraint> constraint = response_format(body["response_format"]))
      found.push_back(std::move(*constraint));
  if (given("structured_outputs")) {
    std::vector<OutputConstraint> more = structured_outputs(body["structured_outputs"]);
    found.insert(found.end(), more.begin(), more.end());
  }
  if (given("guided_json"))
    found.push_back(make(OutputConstraint::Kind::json_schema,
                         schema_text(body["guided_json"], "guided_json"), "guided_json"));
  if (given("guided_regex"))
    found.push_back(make(OutputConstraint::Kind::regex,
                         string_of(body["guided_regex"], "guided_regex"), "guided_regex"));
  if (given("guided_grammar"))
    found.push_back(make(OutputConstraint::Kind::grammar,
                         string_of(body["guided_grammar"], "guided_grammar"), "guided_grammar"));
  if (given("guided_choice")) found.push_back(choices(body["guided_choice"], "guided_choice"));
  if (found.size() > 1)
    throw bad(found[1].field, fmt::format("only one output constraint may be given; '{}' and '{}' "
                                          "both are",
                                          found[0].field, found[1].field));
  if (found.empty()) return std::nullopt;
  return found[0];
}

}  // namespace tessera
