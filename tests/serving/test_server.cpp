// `tessera serve` as users reach it: the real binary on a free loopback port with the
// stories260K model, driven by curl and by the official OpenAI client for Node (tests/node, its
// packages installed by scripts/setup.sh with npm ci). Covers the responses' shapes, streaming as
// OpenAI sends it, errors for bad input (each naming its field, none disturbing the server),
// the API key, metrics, 64 concurrent clients with exact greedy answers, a clean SIGTERM, and a
// quantized mixture of experts served on one rank and two.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/server_process.h"

using namespace tessera::testing;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

const std::string kModels = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";
const std::string kNodeDir = std::string(TESSERA_SOURCE_DIR) + "/tests/node";
const std::string kKey = "test-key";
const std::string kModel = "stories";

// The server's arguments: stories260K, plus TESSERA_SERVE_TEST_ARGS (split at spaces), e.g.
// "-O engine.device=cuda" to run the same tests against a GPU server.
std::vector<std::string> server_arguments(std::vector<std::string> extra = {}) {
  std::vector<std::string> arguments = {"--model", kModels + "/stories260K.bin", "--tokenizer",
                                        kModels + "/tok512.bin"};
  if (const char* more = std::getenv("TESSERA_SERVE_TEST_ARGS")) {
    std::istringstream words(more);
    for (std::string word; words >> word;) arguments.push_back(word);
  }
  arguments.insert(arguments.end(), extra.begin(), extra.end());
  return arguments;
}

class Server : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = std::make_unique<ServerProcess>(
        TESSERA_BINARY, server_arguments({"--api-key", kKey, "--served-model-name", kModel}));
  }
  static void TearDownTestSuite() { server_.reset(); }

  struct Response {
    int status = 0;
    std::string body;
  };
  // curl: POST `body` (a file when it starts with @) to `path`, or GET when body is empty.
  static Response curl(const std::string& path, const std::string& body = "",
                       bool authorized = true) {
    std::string command = "curl -s -N -o - -w '\\n%{http_code}' ";
    if (authorized) command += "-H " + shell_quote("Authorization: Bearer " + kKey) + " ";
    if (!body.empty())
      command += "-H 'Content-Type: application/json' --data-binary " +
                 (body[0] == '@' ? shell_quote(body) : shell_quote(body)) + " ";
    command += shell_quote(server_->url() + path);
    CommandResult result = run_shell(command);
    Response response;
    size_t newline = result.output.rfind('\n');
    response.body = result.output.substr(0, newline);
    response.status = std::atoi(result.output.c_str() + newline + 1);
    return response;
  }
  static std::string completion(const std::string& fields) {
    return "{\"model\": \"" + kModel + "\", " + fields + "}";
  }
  // node tests/node/SCRIPT URL MODEL KEY EXTRA, its output and exit status.
  static CommandResult run_node_script(const std::string& script, const std::string& extra) {
    if (!std::filesystem::exists(kNodeDir + "/node_modules/openai"))
      return {1, "tests/node/node_modules/openai is missing: run scripts/setup.sh (npm ci)"};
    return run_shell("node " + shell_quote(kNodeDir + "/" + script) + " " +
                     shell_quote(server_->url()) + " " + kModel + " " + kKey + " " + extra +
                     " 2>&1");
  }
  static std::unique_ptr<ServerProcess> server_;
};
std::unique_ptr<ServerProcess> Server::server_;

TEST_F(Server, CompletionHasOpenAIsShape) {
  Response r = curl("/v1/completions", completion("\"prompt\": \"Once upon a time\", "
                                                  "\"max_tokens\": 12, \"temperature\": 0"));
  ASSERT_EQ(r.status, 200) << r.body;
  json body = json::parse(r.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_THAT(body["id"].get<std::string>(), ::testing::StartsWith("cmpl-"));
  EXPECT_EQ(body["model"], kModel);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(body["choices"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(body["usage"]["total_tokens"], body["usage"]["prompt_tokens"].get<int>() + 12);
  // The same prompt as token ids gives the same text.
  json ids = json::parse(curl("/v1/completions", completion("\"prompt\": \"Once upon a time\", "
                                                            "\"max_tokens\": 1, \"logprobs\": 0"))
                             .body);
  EXPECT_EQ(ids["usage"]["prompt_tokens"], body["usage"]["prompt_tokens"]);
}

TEST_F(Server, StreamIsServerSentEventsEndingInDone) {
  Response whole = curl("/v1/completions", completion("\"prompt\": \"The dog\", \"max_tokens\": "
                                                      "10, \"temperature\": 0"));
  Response r = curl("/v1/completions",
                    completion("\"prompt\": \"The dog\", \"max_tokens\": 10, \"temperature\": 0, "
                               "\"stream\": true, \"stream_options\": {\"include_usage\": true}"));
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> events;
  size_t at = 0;
  while (at < r.body.size()) {
    size_t end = r.body.find("\n\n", at);
    ASSERT_NE(end, std::string::npos) << "every event ends with a blank line: " << r.body;
    std::string event = r.body.substr(at, end - at);
    if (!event.starts_with(":")) events.push_back(event);  // comments are keep-alives
    at = end + 2;
  }
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "data: [DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_TRUE(events[i].starts_with("data: ")) << events[i];
    json chunk = json::parse(events[i].substr(6));
    EXPECT_EQ(chunk["object"], "text_completion");
    if (i + 2 == events.size()) {  // the usage chunk: no choices
      EXPECT_TRUE(chunk["choices"].empty());
      EXPECT_EQ(chunk["usage"]["completion_tokens"], 10);
      continue;
    }
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null())
      finish = chunk["choices"][0]["finish_reason"].get<std::string>();
  }
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(text, json::parse(whole.body)["choices"][0]["text"].get<std::string>());
}

TEST_F(Server, BadInputGetsAnOpenAIErrorNamingTheField) {
  struct Case {
    std::string what, path, body;
    int status;
    std::string param;  // empty: no param expected
  };
  std::string long_prompt = "\"prompt\": [";
  for (int i = 0; i < 600; ++i) long_prompt += (i ? ", " : "") + std::string("5");
  long_prompt += "]";
  std::string deep(100, '[');
  const std::vector<Case> cases = {
      {"malformed JSON", "/v1/completions", "{\"model\": ", 400, ""},
      {"not an object", "/v1/completions", "[1, 2]", 400, ""},
      {"deep nesting", "/v1/completions", "{\"model\": " + deep, 400, ""},
      {"a string max_tokens", "/v1/completions",
       completion("\"prompt\": \"a\", \"max_tokens\": \"9\""), 400, "max_tokens"},
      {"negative max_tokens", "/v1/completions",
       completion("\"prompt\": \"a\", \"max_tokens\": -4"), 400, "max_tokens"},
      {"huge max_tokens", "/v1/completions",
       completion("\"prompt\": \"a\", \"max_tokens\": 99999999999"), 400, "max_tokens"},
      {"an unknown field", "/v1/completions", completion("\"prompt\": \"a\", \"frobnicate\": 1"),
       400, "frobnicate"},
      {"a prompt longer than max_model_len", "/v1/completions", completion(long_prompt), 400,
       "prompt"},
      {"a token id out of range", "/v1/completions", completion("\"prompt\": [1, 512]"), 400,
       "prompt"},
      {"a negative token id", "/v1/completions", completion("\"prompt\": [1, -3]"), 400, "prompt"},
      {"an empty prompt", "/v1/completions", completion("\"prompt\": \"\""), 400, "prompt"},
      {"no prompt", "/v1/completions", completion("\"max_tokens\": 3"), 400, "prompt"},
      {"a bad temperature", "/v1/completions", completion("\"prompt\": \"a\", \"temperature\": -1"),
       400, "temperature"},
      {"a bad n", "/v1/completions", completion("\"prompt\": \"a\", \"n\": 0"), 400, "n"},
      {"a bad stop", "/v1/completions", completion("\"prompt\": \"a\", \"stop\": 3"), 400, "stop"},
      {"an unknown model", "/v1/completions", "{\"model\": \"gpt-9\", \"prompt\": \"a\"}", 404,
       "model"},
      {"empty messages", "/v1/chat/completions", completion("\"messages\": []"), 400, "messages"},
      {"a bad role", "/v1/chat/completions",
       completion("\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]"), 400, "messages"},
      {"invalid UTF-8", "/v1/completions", completion("\"prompt\": \"\xff\xfe\""), 400, "prompt"},
      {"a lone surrogate", "/v1/completions", completion("\"prompt\": \"a\\ud800\""), 400,
       "prompt"},
      {"an overflowing temperature", "/v1/completions",
       completion("\"prompt\": \"a\", \"temperature\": 1e309"), 400, "temperature"},
      {"invalid UTF-8 in a message", "/v1/chat/completions",
       completion("\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]"), 400, "messages"},
      {"an unknown route", "/v1/engines", "{}", 404, ""},
  };
  for (const Case& c : cases) {
    Response r = curl(c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.what << ": " << r.body;
    json body = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(body.is_object() && body.contains("error")) << c.what << ": " << r.body;
    EXPECT_FALSE(body["error"]["message"].get<std::string>().empty()) << c.what;
    EXPECT_TRUE(body["error"].contains("type") && body["error"].contains("code")) << c.what;
    if (!c.param.empty()) {
      EXPECT_EQ(body["error"]["param"], c.param) << c.what << ": " << r.body;
    }
  }
  // An oversized body is refused with 413.
  std::string path = (std::filesystem::temp_directory_path() / "tessera-big-body.json").string();
  {
    std::ofstream big(path);
    big << completion("\"prompt\": \"" + std::string(9u << 20, 'a') + "\"");
  }
  Response big = curl("/v1/completions", "@" + path);
  EXPECT_EQ(big.status, 413) << big.body.substr(0, 200);
  std::filesystem::remove(path);
  // None of it disturbed the server.
  EXPECT_EQ(curl("/health").status, 200);
  EXPECT_EQ(curl("/v1/completions", completion("\"prompt\": \"a\", \"max_tokens\": 2")).status,
            200);
}

TEST_F(Server, V1RoutesNeedTheApiKey) {
  Response r = curl("/v1/models", "", /*authorized=*/false);
  EXPECT_EQ(r.status, 401);
  EXPECT_THAT(r.body, HasSubstr("API key"));
  EXPECT_EQ(curl("/v1/models").status, 200);
  EXPECT_EQ(curl("/health", "", false).status, 200);  // health and metrics stay open
  EXPECT_EQ(curl("/version", "", false).status, 200);
}

TEST_F(Server, MetricsAreInPrometheusTextFormat) {
  curl("/v1/completions", completion("\"prompt\": \"Once\", \"max_tokens\": 3"));
  Response r = curl("/metrics");
  ASSERT_EQ(r.status, 200);
  for (const char* name :
       {"tessera:num_requests_running", "tessera:num_requests_waiting",
        "tessera:kv_cache_usage_perc", "tessera:prompt_tokens_total",
        "tessera:generation_tokens_total", "tessera:prefix_cache_hit_rate",
        "tessera:time_to_first_token_seconds_bucket", "tessera:inter_token_latency_seconds_sum",
        "tessera:e2e_request_latency_seconds_count"})
    EXPECT_THAT(r.body, HasSubstr(std::string(name) + "{model_name=\"stories\"")) << name;
  EXPECT_THAT(r.body, HasSubstr("# TYPE tessera:time_to_first_token_seconds histogram"));
  EXPECT_THAT(r.body, HasSubstr("le=\"+Inf\""));
}

TEST_F(Server, TheOpenAIClientForNodeWorks) {
  CommandResult r = run_node_script("openai_client.mjs", "");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("all OpenAI client checks passed"));
}

TEST_F(Server, StructuredOutputsThroughTheOpenAIClientParseAndValidate) {
  CommandResult r = run_node_script("structured_output.mjs", "");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("all structured output checks passed"));
}

TEST_F(Server, ToolCallsThroughTheOpenAIClientParseAndValidate) {
  CommandResult r = run_node_script("tool_calls.mjs", "");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("all tool call checks passed"));
}

TEST_F(Server, SixtyFourConcurrentClientsGetExactAnswersAndFreeTheCache) {
  CommandResult r = run_node_script("load_test.mjs", "64");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("0 failed"));
  EXPECT_THAT(r.output, HasSubstr("afterwards: 0 running, KV-cache usage 0"));
}

TEST(ServerLifecycle, SigtermFinishesTheRunningRequestAndExitsZero) {
  ServerProcess server(TESSERA_BINARY, server_arguments());
  // A request in flight when the signal comes still gets its whole answer.
  std::string out = (std::filesystem::temp_directory_path() / "tessera-sigterm.json").string();
  std::filesystem::remove(out);
  run_shell("curl -s -o " + shell_quote(out) + " " + shell_quote(server.url() + "/v1/completions") +
            " -d '{\"model\": \"" + kModels + "/stories260K.bin\", \"prompt\": \"Once\", " +
            "\"max_tokens\": 400, \"ignore_eos\": true}' > /dev/null 2>&1 &");
  for (int attempt = 0; attempt < 200; ++attempt) {  // until the engine runs it
    CommandResult metrics = run_shell("curl -s " + shell_quote(server.url() + "/metrics"));
    if (metrics.output.find("tessera:num_requests_running{model_name=\"" + kModels +
                            "/stories260K.bin\"} 1") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
  json answer;
  for (int attempt = 0; attempt < 100 && !answer.is_object(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    answer = json::parse(text.str(), nullptr, false);
  }
  ASSERT_TRUE(answer.is_object()) << "the request in flight got no answer";
  EXPECT_EQ(answer["usage"]["completion_tokens"], 400) << answer.dump();
  std::filesystem::remove(out);
  EXPECT_THAT(server.stderr_text(), HasSubstr("SIGTERM"));
}

// A mixture of experts as users download it (llama.cpp's Q4_K_M of a Qwen3-MoE, its experts
// stacked in Q4_K and Q6_K blocks) serves the greedy text `tessera generate` prints, on one rank
// and with its experts placed whole on two CPU ranks. Many of its tokens decode to the same
// replacement character, so the two placements' answers are also held to each other's log
// probabilities: a token chosen differently would show there.
TEST(ServerLifecycle, AMixtureOfExpertsServesWhatGenerateGives) {
  const std::string model =
      std::string(TESSERA_SOURCE_DIR) + "/tests/data/quant/models/synthetic-qwen3moe-q4_k_m.gguf";
  const CommandResult generated =
      run_shell(std::string(TESSERA_BINARY) + " generate --model " + shell_quote(model) +
                " --prompt 'Once upon a time' -n 16 --temperature 0 -q 2>/dev/null");
  ASSERT_EQ(generated.status, 0);
  std::vector<double> one_rank_logprobs;
  for (const std::vector<std::string>& placement :
       {std::vector<std::string>{}, {"-tp", "2", "--enable-expert-parallel"}}) {
    std::vector<std::string> arguments = {"--model", model};
    arguments.insert(arguments.end(), placement.begin(), placement.end());
    ServerProcess server(TESSERA_BINARY, arguments);
    const json request = {{"model", model},
                          {"prompt", "Once upon a time"},
                          {"max_tokens", 16},
                          {"temperature", 0},
                          {"logprobs", 0}};
    const CommandResult response = run_shell(
        "curl -s -H 'Content-Type: application/json' --data-binary " + shell_quote(request.dump()) +
        " " + shell_quote(server.url() + "/v1/completions"));
    const json body = json::parse(response.output, nullptr, false);
    ASSERT_TRUE(body.is_object()) << response.output;
    ASSERT_TRUE(body.contains("choices")) << response.output;
    EXPECT_EQ(body["choices"][0]["text"].get<std::string>() + "\n", generated.output)
        << placement.size() << " placement arguments";
    EXPECT_GT(body["usage"]["completion_tokens"].get<int>(), 0);
    const std::vector<double> logprobs =
        body["choices"][0]["logprobs"]["token_logprobs"].get<std::vector<double>>();
    if (one_rank_logprobs.empty()) {
      one_rank_logprobs = logprobs;
    } else {
      ASSERT_EQ(logprobs.size(), one_rank_logprobs.size());
      for (size_t i = 0; i < logprobs.size(); ++i)
        EXPECT_NEAR(logprobs[i], one_rank_logprobs[i], 1e-4) << "token " << i;
    }
    EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
  }
}

TEST(ServerLifecycle, ABusyPortIsAClearError) {
  ServerProcess first(TESSERA_BINARY, {"--model", "synthetic:tiny"});
  CommandResult r =
      run_shell(std::string(TESSERA_BINARY) + " serve --model synthetic:tiny --port " +
                std::to_string(first.port()) + " 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output,
              HasSubstr("cannot listen on http://127.0.0.1:" + std::to_string(first.port())));
}

}  // namespace

TEST(ServerLifecycle, AFullQueueAnswers503WithRetryAfter) {
  // One sequence at a time and one waiting request: a burst must overflow the queue.
  ServerProcess server(TESSERA_BINARY, server_arguments({"-O", "engine.max_num_seqs=1",
                                                         "--max-waiting-requests", "1"}));
  const std::string body = "{\"model\": \"" + kModels +
                           "/stories260K.bin\", \"prompt\": \"Once\", \"max_tokens\": 300, "
                           "\"ignore_eos\": true}";
  std::string burst;
  for (int i = 0; i < 8; ++i)
    burst += "curl -s -D - -o /dev/null -d " + shell_quote(body) + " " +
             shell_quote(server.url() + "/v1/completions") + " & ";
  CommandResult r = run_shell(burst + "wait");
  int overloaded = 0;
  for (size_t at = r.output.find("HTTP/1.1 503"); at != std::string::npos;
       at = r.output.find("HTTP/1.1 503", at + 1))
    ++overloaded;
  EXPECT_GE(overloaded, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Retry-After: 1"));
  EXPECT_THAT(r.output, HasSubstr("HTTP/1.1 200"));  // the admitted ones are answered
  EXPECT_EQ(server.terminate(), 0);
}
