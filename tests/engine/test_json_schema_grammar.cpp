// JSON Schema to grammar: on the schemas of tests/data/structured_output/schema_cases.json the
// grammar accepts exactly the candidate texts a JSON Schema validator finds valid
// (make_schema_cases.py made the verdicts); unsupported keywords are refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/structured_output/grammar_automaton.h"
#include "engine/structured_output/grammar_compiler.h"
#include "engine/structured_output/json_schema_grammar.h"
#include "runtime/check.h"

namespace tessera {
namespace {

std::string schema_error(const std::string& schema_text) {
  try {
    json_schema_grammar(nlohmann::ordered_json::parse(schema_text), "response_format.json_schema");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(JsonSchemaGrammar, AcceptsExactlyWhatTheValidatorAccepts) {
  std::ifstream file(std::string(TESSERA_SOURCE_DIR) +
                     "/tests/data/structured_output/schema_cases.json");
  ASSERT_TRUE(file) << "missing schema_cases.json";
  const auto cases = nlohmann::ordered_json::parse(file);
  ASSERT_GE(cases.size(), 20u);
  size_t checked = 0;
  for (const auto& test : cases) {
    const Grammar grammar = json_schema_grammar(test["schema"], "schema");
    GrammarAutomaton automaton(grammar);
    for (const auto& candidate : test["candidates"]) {
      const std::string text = candidate["text"];
      EXPECT_EQ(automaton.matches(text), candidate["valid"].get<bool>())
          << "schema " << test["schema"].dump() << "\ntext " << text;
      ++checked;
    }
  }
  EXPECT_GE(checked, 150u);
}

TEST(JsonSchemaGrammar, KeepsThePropertiesInTheSchemasOrder) {
  const Grammar grammar = json_schema_grammar(
      nlohmann::ordered_json::parse(
          R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},
              "required":["zeta","alpha"],"additionalProperties":false})"),
      "schema");
  GrammarAutomaton automaton(grammar);
  EXPECT_TRUE(automaton.matches(R"({"zeta":1,"alpha":2})"));
  EXPECT_FALSE(automaton.matches(R"({"alpha":2,"zeta":1})"));
}

TEST(JsonSchemaGrammar, JsonObjectIsAnyObject) {
  GrammarAutomaton automaton(json_object_grammar());
  EXPECT_TRUE(automaton.matches(R"({"a": [1, 2.5e3, {"b": null}], "c": "d\u00e9"})"));
  EXPECT_TRUE(automaton.matches("{}"));
  EXPECT_FALSE(automaton.matches("[1]"));
  EXPECT_FALSE(automaton.matches(R"({"a": 01})"));
}

TEST(JsonSchemaGrammar, WhitespaceIsBounded) {
  GrammarAutomaton automaton(json_object_grammar());
  EXPECT_TRUE(automaton.matches("{\n" + std::string(kMaxJsonIndent, ' ') + "\"a\": 1}"));
  EXPECT_FALSE(automaton.matches("{\n" + std::string(kMaxJsonIndent + 1, ' ') + "\"a\": 1}"));
  EXPECT_FALSE(automaton.matches("{  \"a\": 1}"));
}

TEST(JsonSchemaGrammar, RefusesWhatItDoesNotSupportByName) {
  EXPECT_NE(schema_error(R"({"type":"array","uniqueItems":true})")
                .find("response_format.json_schema: the keyword 'uniqueItems' is not supported (at "
                      "schema location #)"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"properties":{"a":{"type":"string","contentEncoding":"base64"}}})")
                .find("'contentEncoding' is not supported (at schema location #/properties/a)"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"number","minimum":0.5})").find("only whole-number bounds"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"string","format":"hostname"})")
                .find("format 'hostname' is not supported"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"https://example.com/schema"})")
                .find("only references inside the schema"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"#/$defs/missing"})").find("points to nothing"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"strin"})").find("unknown type 'strin'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"object","properties":{},"required":["a"]})")
                .find("required property 'a' is not among 'properties'"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"allOf":[{"type":"string"},{"maxLength":3}]})")
                .find("'allOf' is supported with exactly one"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})")
                .find("left-recursive"),
            std::string::npos);
  EXPECT_NE(schema_error(R"j({"type":"string","pattern":"(?!x)"})j").find("lookaround"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"array","maxItems":100000})")
                .find("'maxItems' must be a whole number from 0 to"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
