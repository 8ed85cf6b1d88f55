// The pieces behind /v1/completions and /v1/chat/completions, each without a socket or an
// engine: request parsing (CompletionParser), the fan-out of n (fan_out_choices), response
// assembly (CompletionAssembler) and streaming (CompletionStream). tests/serving/test_server.cpp
// drives them together through the real server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/llm_engine.h"
#include "engine/server/choice_fan_out.h"
#include "engine/server/completion_assembler.h"
#include "engine/server/completion_parser.h"
#include "engine/server/completion_stream.h"
#include "models/tokenizer/byte_tokenizer.h"

using namespace tessera;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

const std::unique_ptr<Tokenizer> tokenizer = make_byte_tokenizer();

CompletionParser parser() {
  PromptLimits limits;
  limits.vocab_size = tokenizer->vocab_size();
  limits.max_model_len = 64;
  return CompletionParser(*tokenizer, ChatTemplate(), limits, "served");
}

ApiError error_of(const std::string& body, bool chat = false) {
  try {
    parser().parse(body, chat);
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "");
}

RequestOutput output(const std::string& id, const std::string& text,
                     FinishReason finish = FinishReason::none, int64_t completion_tokens = 0) {
  RequestOutput result;
  result.request_id = id;
  result.text = text;
  result.token_ids = {static_cast<int32_t>(text.size())};
  result.finish_reason = finish;
  result.completion_tokens = completion_tokens;
  return result;
}

ResponseContext context(bool chat) {
  ResponseContext result;
  result.chat = chat;
  result.id = chat ? "chatcmpl-1" : "cmpl-1";
  result.created = 7;
  result.model = "served";
  result.tokenizer = tokenizer.get();
  return result;
}

// The JSON of each `data:` event, "[DONE]" as a string.
std::vector<json> events_of(const std::string& text) {
  std::vector<json> events;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << text;
    const std::string event = text.substr(at, end - at);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    const std::string data = event.substr(6);
    events.push_back(data == "[DONE]" ? json(data) : json::parse(data));
    at = end + 2;
  }
  return events;
}

}  // namespace

TEST(CompletionParser, MakesATypedRequestForTheServedModel) {
  CompletionRequest request = parser().parse(
      R"({"model": "served", "prompt": ["ab", [5, 6, 7]], "n": 2, "seed": 3, "stream": true,
          "stream_options": {"include_usage": true}, "temperature": 0.5})",
      false);
  EXPECT_FALSE(request.chat);
  ASSERT_EQ(request.prompts.size(), 2u);
  EXPECT_EQ(request.prompts[1], (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(request.params.n, 2);
  EXPECT_EQ(request.params.seed, 3u);
  EXPECT_DOUBLE_EQ(request.params.temperature, 0.5);
  EXPECT_TRUE(request.stream);
  EXPECT_TRUE(request.include_usage);
  EXPECT_FALSE(request.max_tokens_given);

  CompletionRequest chat = parser().parse(
      R"({"model": "served", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})",
      true);
  EXPECT_TRUE(chat.chat);
  EXPECT_EQ(chat.prompts.size(), 1u);
  EXPECT_TRUE(chat.max_tokens_given);
  EXPECT_EQ(chat.params.max_tokens, 4);
}

TEST(CompletionParser, ErrorsNameTheFieldAndAnotherModelIsNotFound) {
  ApiError model = error_of(R"({"model": "other", "prompt": "a"})");
  EXPECT_EQ(model.status, 404);
  EXPECT_EQ(model.param, "model");
  EXPECT_EQ(model.code, "model_not_found");
  ApiError json_error = error_of("{not json");
  EXPECT_EQ(json_error.status, 400);
  EXPECT_THAT(json_error.what(), HasSubstr("not valid JSON"));
  ApiError temperature = error_of(R"({"model": "served", "prompt": "a", "temperature": 9})");
  EXPECT_EQ(temperature.status, 400);
  EXPECT_EQ(temperature.param, "temperature");
  ApiError too_long = error_of(R"({"model": "served", "prompt": "a", "max_tokens": 64})");
  EXPECT_EQ(too_long.param, "max_tokens");
  EXPECT_EQ(error_of(R"({"model": "served", "messages": []})", true).param, "messages");
}

// Counts the texts it is asked to encode; otherwise the byte tokenizer.
class CountingTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text, bool add_special) const override {
    ++encoded;
    return tokenizer->encode(text, add_special);
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    return tokenizer->decode(ids, skip_special);
  }
  int64_t vocab_size() const override { return tokenizer->vocab_size(); }
  std::optional<int32_t> bos_id() const override { return tokenizer->bos_id(); }
  std::vector<int32_t> eos_ids() const override { return tokenizer->eos_ids(); }
  std::string name() const override { return "counting"; }
  mutable int encoded = 0;
};

// Issue 36, item 8: a prompt text too long for the model in bytes is a 400 naming its field
// before the tokenizer spends any time on it, on both routes.
TEST(CompletionParser, APromptTooLongInBytesIsRefusedBeforeTokenizing) {
  CountingTokenizer counting;
  PromptLimits limits;
  limits.vocab_size = counting.vocab_size();
  limits.max_model_len = 64;
  limits.max_prompt_bytes = max_prompt_bytes(limits.max_model_len, counting);
  EXPECT_EQ(limits.max_prompt_bytes, 64u * 4 * longest_token_bytes(counting))
      << "the longest token per token, with normalization's room";
  const CompletionParser parse(counting, ChatTemplate(), limits, "served");
  const std::string fits(limits.max_prompt_bytes, 'a');
  const std::string too_long = fits + "a";
  auto error = [&](const std::string& body, bool chat) {
    try {
      parse.parse(body, chat);
    } catch (const ApiError& refused) {
      return refused;
    }
    return ApiError(0, "");
  };
  const ApiError completion =
      error(json{{"model", "served"}, {"prompt", {"a", too_long}}}.dump(), false);
  EXPECT_EQ(completion.status, 400);
  EXPECT_EQ(completion.param, "prompt");
  EXPECT_THAT(completion.what(),
              HasSubstr("'prompt[1]' is " + std::to_string(too_long.size()) + " bytes"));
  const ApiError chat = error(
      json{{"model", "served"}, {"messages", {{{"role", "user"}, {"content", too_long}}}}}.dump(),
      true);
  EXPECT_EQ(chat.param, "messages");
  EXPECT_EQ(counting.encoded, 1) << "only the short first prompt was tokenized";
  // Within the byte bound the token count decides, after tokenizing.
  EXPECT_EQ(error(json{{"model", "served"}, {"prompt", fits}}.dump(), false).param, "prompt");
  EXPECT_EQ(counting.encoded, 2);
}

TEST(ChoiceFanOut, OneRequestPerPromptAndChoiceWithDerivedSeeds) {
  CompletionRequest request;
  request.prompts = {{1, 2, 3}, {4, 5}};
  request.params.n = 3;
  request.params.seed = 42;
  std::vector<ChoiceRequest> choices = fan_out_choices(request, "cmpl-9", 64);
  ASSERT_EQ(choices.size(), 6u);
  for (size_t i = 0; i < choices.size(); ++i) {
    EXPECT_EQ(choices[i].id, "cmpl-9-" + std::to_string(i));
    EXPECT_EQ(choices[i].prompt_index, i / 3);
    EXPECT_EQ(choices[i].params.n, 1);
    // Each prompt's choices take the seeds of choices 0..n-1, the first the request's own.
    EXPECT_EQ(choices[i].params.seed, derive_seed(42, i % 3));
  }
  EXPECT_EQ(choices[0].params.seed, 42u);
  EXPECT_NE(choices[1].params.seed, choices[2].params.seed);

  request.params.seed.reset();
  for (const ChoiceRequest& choice : fan_out_choices(request, "x", 64))
    EXPECT_FALSE(choice.params.seed.has_value());
}

TEST(ChoiceFanOut, MaxTokensDefaultsTo16ForCompletionsAndTheRoomLeftForChat) {
  CompletionRequest request;
  request.prompts = {std::vector<int32_t>(10, 1), std::vector<int32_t>(55, 1)};
  std::vector<ChoiceRequest> completions = fan_out_choices(request, "x", 64);
  EXPECT_EQ(completions[0].params.max_tokens, default_completion_max_tokens);
  EXPECT_EQ(completions[1].params.max_tokens, 9);  // 64 - 55 left
  request.chat = true;
  EXPECT_EQ(fan_out_choices(request, "x", 64)[0].params.max_tokens, 54);
  request.max_tokens_given = true;
  request.params.max_tokens = 5;
  EXPECT_EQ(fan_out_choices(request, "x", 64)[0].params.max_tokens, 5);
}

TEST(CompletionAssembler, CollectsEachChoiceAndBuildsTheWholeResponse) {
  CompletionAssembler assembler(context(false), {"r-0", "r-1"}, 6);
  EXPECT_EQ(assembler.record(output("r-1", "x")), 1u);
  EXPECT_EQ(assembler.record(output("r-0", "ab")), 0u);
  EXPECT_EQ(assembler.record(output("r-0", "c", FinishReason::length, 2)), 0u);
  EXPECT_FALSE(assembler.finished());
  assembler.record(output("r-1", "y", FinishReason::stop, 3));
  ASSERT_TRUE(assembler.finished());
  json body = json::parse(assembler.final_body());
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["id"], "cmpl-1");
  EXPECT_EQ(body["choices"][0]["text"], "abc");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["choices"][1]["text"], "xy");
  EXPECT_EQ(body["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 6);
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  EXPECT_EQ(body["usage"]["total_tokens"], 11);
}

TEST(CompletionAssembler, AFailedRequestMakesTheBodyAnError) {
  CompletionAssembler assembler(context(true), {"r-0"}, 1);
  RequestOutput failed = output("r-0", "", FinishReason::error);
  failed.error = "out of memory";
  assembler.record(failed);
  ASSERT_TRUE(assembler.finished());
  json body = json::parse(assembler.final_body());
  EXPECT_EQ(body["error"]["type"], "internal_error");
  EXPECT_THAT(body["error"]["message"].get<std::string>(), HasSubstr("out of memory"));
}

TEST(CompletionStream, ChatChunksStartWithTheRoleAndEndWithUsageAndDone) {
  CompletionAssembler assembler(context(true), {"r-0", "r-1"}, 4);
  CompletionStream stream(2, /*include_usage=*/true);
  std::string text;
  for (const RequestOutput& out :
       {output("r-0", "He"), output("r-0", "y"), output("r-1", "Ho", FinishReason::stop, 1),
        output("r-0", "", FinishReason::length, 2)})
    text += stream.event(out, assembler.record(out), assembler);
  ASSERT_TRUE(assembler.finished());
  text += stream.closing_events(assembler);
  std::vector<json> events = events_of(text);
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["content"], "He");
  EXPECT_FALSE(events[1]["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(events[2]["choices"][0]["index"], 1);
  EXPECT_EQ(events[2]["choices"][0]["delta"]["role"], "assistant");  // choice 1's first
  EXPECT_EQ(events[3]["choices"][0]["finish_reason"], "length");
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(events[i]["usage"].is_null()) << i;
  EXPECT_TRUE(events[4]["choices"].empty());
  EXPECT_EQ(events[4]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(events[5], "[DONE]");
}

TEST(CompletionStream, WithoutUsageItEndsInDoneAndAFailureIsAnErrorEvent) {
  CompletionAssembler assembler(context(false), {"r-0"}, 1);
  CompletionStream stream(1, /*include_usage=*/false);
  std::string text =
      stream.event(output("r-0", "a"), assembler.record(output("r-0", "a")), assembler);
  EXPECT_FALSE(json::parse(text.substr(6)).contains("usage"));
  RequestOutput failed = output("r-0", "", FinishReason::error);
  failed.error = "device lost";
  text += stream.event(failed, assembler.record(failed), assembler);
  text += stream.closing_events(assembler);
  std::vector<json> events = events_of(text);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["choices"][0]["text"], "a");
  EXPECT_THAT(events[1]["error"]["message"].get<std::string>(), HasSubstr("device lost"));
  EXPECT_EQ(events[2], "[DONE]");
}
