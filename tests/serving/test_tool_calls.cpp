// Tool calling: each template family's calls found in complete and streamed outputs (no piece of
// a call ever shown as content), text that is not a call kept as content, parallel_tool_calls,
// the grammar of tool_choice required and named, and the tools rendered in each family's prompt.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/server/chat_tools.h"
#include "engine/server/tool_call_extractor.h"
#include "engine/structured_output/grammar_automaton.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ChatTools weather_tools(ChatTools::Choice choice) {
  ChatTools tools;
  tools.tools = {
      {"weather", "",
       R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false})"},
      {"time", "", ""}};
  tools.choice = choice;
  return tools;
}

struct Extracted {
  std::string shown;  // content sent while streaming
  ToolCallExtractor::Result result;
};

// The output fed in pieces of `piece` bytes, as a stream would bring it.
Extracted extract(const ChatTools& tools, ChatTemplate::Kind kind, const std::string& output,
                  size_t piece) {
  ToolCallExtractor extractor(tools, kind, "req-0");
  Extracted out;
  for (size_t at = 0; at < output.size(); at += piece)
    out.shown += extractor.push(std::string_view(output).substr(at, piece));
  out.result = extractor.finish();
  return out;
}

TEST(ToolCallExtractor, FindsEachFamilysCallsWholeAndStreamed) {
  const ChatTools tools = weather_tools(ChatTools::Choice::automatic);
  struct Case {
    ChatTemplate::Kind kind;
    std::string output;
    std::string content;
  };
  const std::vector<Case> cases = {
      {ChatTemplate::Kind::chatml,
       "Let me check.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
       "</tool_call>\n<tool_call>\n{\"name\": \"time\", \"arguments\": {}}\n</tool_call>",
       "Let me check.\n"},
      {ChatTemplate::Kind::plain,
       "<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>"
       "<tool_call>{\"name\": \"time\", \"arguments\": {}}</tool_call>",
       ""},
      {ChatTemplate::Kind::mistral,
       "[TOOL_CALLS] [{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": "
       "\"time\", \"arguments\": {}}]",
       ""},
      {ChatTemplate::Kind::llama3,
       "<|python_tag|>{\"name\": \"weather\", \"parameters\": {\"city\": \"Paris\"}}; {\"name\": "
       "\"time\", \"parameters\": {}}",
       ""},
  };
  for (const Case& test : cases)
    for (size_t piece : {size_t{1}, size_t{3}, size_t{1000}}) {
      const Extracted got = extract(tools, test.kind, test.output, piece);
      EXPECT_EQ(got.shown + got.result.content, test.content) << test.output << " / " << piece;
      EXPECT_THAT(got.shown, Not(HasSubstr("<tool"))) << piece;
      EXPECT_THAT(got.shown, Not(HasSubstr("[TOOL"))) << piece;
      ASSERT_EQ(got.result.calls.size(), 2u) << test.output;
      EXPECT_EQ(got.result.calls[0].name, "weather");
      EXPECT_EQ(got.result.calls[0].arguments, R"({"city":"Paris"})");
      EXPECT_EQ(got.result.calls[1].name, "time");
      EXPECT_EQ(got.result.calls[1].arguments, "{}");
      EXPECT_NE(got.result.calls[0].id, got.result.calls[1].id);
    }
}

TEST(ToolCallExtractor, TextThatIsNotACallIsContent) {
  const ChatTools tools = weather_tools(ChatTools::Choice::automatic);
  for (const auto& [kind, output] : std::vector<std::pair<ChatTemplate::Kind, std::string>>{
           {ChatTemplate::Kind::chatml, "Sunny. <tool_call>{\"name\": \"weather\", broken"},
           {ChatTemplate::Kind::chatml,
            "<tool_call>{\"name\": \"unknown\", \"arguments\": {}}</tool_call>"},
           {ChatTemplate::Kind::llama3, "{\"answer\": 42}"},
           {ChatTemplate::Kind::llama3, "It is sunny in Paris."},
           {ChatTemplate::Kind::mistral, "[TOOL_CALLS] not json"},
           {ChatTemplate::Kind::chatml, "a < b and <tool is not a tag"}}) {
    const Extracted got = extract(tools, kind, output, 2);
    EXPECT_EQ(got.shown + got.result.content, output);
    EXPECT_TRUE(got.result.calls.empty()) << output;
  }
}

TEST(ToolCallExtractor, ParallelToolCallsFalseKeepsTheFirst) {
  ChatTools tools = weather_tools(ChatTools::Choice::automatic);
  tools.parallel = false;
  const Extracted got = extract(tools, ChatTemplate::Kind::mistral,
                                "[TOOL_CALLS] [{\"name\": \"time\", \"arguments\": {}}, {\"name\": "
                                "\"time\", \"arguments\": {}}]",
                                5);
  EXPECT_EQ(got.result.calls.size(), 1u);
}

TEST(ToolCallExtractor, RequiredAndNamedReadTheGrammarsOutput) {
  const Extracted required = extract(
      weather_tools(ChatTools::Choice::required), ChatTemplate::Kind::chatml,
      R"([{"name": "time", "parameters": {}}, {"name": "weather", "parameters": {"city": "Oslo"}}])",
      4);
  EXPECT_EQ(required.shown, "");
  ASSERT_EQ(required.result.calls.size(), 2u);
  EXPECT_EQ(required.result.calls[1].arguments, R"({"city":"Oslo"})");
  ChatTools named = weather_tools(ChatTools::Choice::named);
  named.named = "weather";
  const Extracted call = extract(named, ChatTemplate::Kind::llama3, R"({"city": "Rome"})", 3);
  ASSERT_EQ(call.result.calls.size(), 1u);
  EXPECT_EQ(call.result.calls[0].name, "weather");
  // Cut short (max_tokens): the text is returned, not a call.
  const Extracted cut = extract(named, ChatTemplate::Kind::llama3, R"({"city": "Ro)", 3);
  EXPECT_TRUE(cut.result.calls.empty());
  EXPECT_EQ(cut.result.content, R"({"city": "Ro)");
}

bool matches(const OutputConstraint& constraint, std::string_view text) {
  return GrammarAutomaton(constraint_grammar(constraint)).matches(text);
}

TEST(ToolCallConstraint, RequiredIsAListOfCallsOfTheOfferedTools) {
  ChatTools tools = weather_tools(ChatTools::Choice::required);
  // A tool whose parameters refer to their own definitions.
  tools.tools.push_back(
      {"route", "", R"({"type":"object","$defs":{"place":{"type":"string","maxLength":4}},
      "properties":{"from":{"$ref":"#/$defs/place"}},"required":["from"],"additionalProperties":false})"});
  const OutputConstraint constraint = *tool_call_constraint(tools);
  EXPECT_TRUE(matches(constraint, R"([{"name":"weather","parameters":{"city":"Paris"}}])"));
  EXPECT_TRUE(matches(
      constraint,
      R"([{"name":"time","parameters":{}},{"name":"route","parameters":{"from":"Oslo"}}])"));
  EXPECT_FALSE(matches(constraint, R"([])"));
  EXPECT_FALSE(matches(constraint, R"([{"name":"other","parameters":{}}])"));
  EXPECT_FALSE(matches(constraint, R"([{"name":"weather","parameters":{"town":"Paris"}}])"));
  EXPECT_FALSE(matches(constraint, R"([{"name":"route","parameters":{"from":"Paris"}}])"));
  tools.parallel = false;
  EXPECT_FALSE(matches(*tool_call_constraint(tools),
                       R"([{"name":"time","parameters":{}},{"name":"time","parameters":{}}])"));
  ChatTools named = weather_tools(ChatTools::Choice::named);
  named.named = "weather";
  EXPECT_TRUE(matches(*tool_call_constraint(named), R"({"city":"Paris"})"));
  EXPECT_FALSE(matches(*tool_call_constraint(named), R"({})"));
  EXPECT_FALSE(tool_call_constraint(weather_tools(ChatTools::Choice::automatic)));
}

TEST(ChatTemplateTools, EachFamilyOffersToolsAndRendersCallsAndResults) {
  const std::vector<ToolDefinition> tools = {{"weather", "The weather", R"({"type":"object"})"}};
  const std::vector<ChatMessage> messages = {
      {"system", "Be brief.", {}, ""},
      {"user", "Weather in Paris?", {}, ""},
      {"assistant", "", {{"call_1", "weather", R"({"city": "Paris"})"}}, ""},
      {"tool", "18C", {}, "call_1"},
      {"tool", "sunny", {}, "call_1"},
  };
  bool add_special = false;
  const std::string chatml =
      ChatTemplate(ChatTemplate::Kind::chatml).render_text(messages, tools, &add_special);
  EXPECT_THAT(chatml, HasSubstr("<|im_start|>system\nBe brief.\n\n# Tools\n"));
  EXPECT_THAT(
      chatml,
      HasSubstr(
          "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"weather\", "
          "\"description\": \"The weather\", \"parameters\": {\"type\": \"object\"}}}\n</tools>"));
  EXPECT_THAT(
      chatml,
      HasSubstr("<|im_start|>assistant\n<tool_call>\n{\"name\": \"weather\", \"arguments\": "
                "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>"));
  EXPECT_THAT(
      chatml,
      HasSubstr("<|im_start|>user\n<tool_response>\n18C\n</tool_response>\n<tool_response>\n"
                "sunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n"));
  const std::string llama =
      ChatTemplate(ChatTemplate::Kind::llama3).render_text(messages, tools, &add_special);
  EXPECT_THAT(
      llama,
      HasSubstr("<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions"));
  EXPECT_THAT(
      llama,
      HasSubstr(
          "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"weather\","));
  EXPECT_THAT(llama,
              HasSubstr("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"weather\", "
                        "\"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"));
  EXPECT_THAT(llama, HasSubstr("<|start_header_id|>ipython<|end_header_id|>\n\n18C<|eot_id|>"));
  const std::string mistral =
      ChatTemplate(ChatTemplate::Kind::mistral).render_text(messages, tools, &add_special);
  EXPECT_THAT(mistral, HasSubstr("[AVAILABLE_TOOLS] [{\"type\": \"function\""));
  EXPECT_THAT(
      mistral,
      HasSubstr("[/AVAILABLE_TOOLS][INST] Be brief.\n\nWeather in Paris? [/INST]"
                "[TOOL_CALLS] [{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}, "
                "\"id\": \"call_1\"}]</s>[TOOL_RESULTS] {\"content\": \"18C\", \"call_id\": "
                "\"call_1\"}[/TOOL_RESULTS]"));
  // Without tools, nothing about them is said.
  EXPECT_THAT(ChatTemplate(ChatTemplate::Kind::chatml).render_text({messages[1]}, {}, &add_special),
              Not(HasSubstr("Tools")));
}

}  // namespace
}  // namespace tessera
