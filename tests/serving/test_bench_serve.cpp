// `tessera bench serve`'s load generator: the server-sent-events reader, prompt files, whole runs
// against a stand-in OpenAI completions server inside the test (streaming exactly as OpenAI
// streams: text chunks, a finish_reason chunk, a usage chunk, then data: [DONE]) that counts how
// many requests it serves at once and refuses a marked prompt, and the binary against a real
// `tessera serve` of stories260K on a free loopback port.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/bench/serve_load.h"
#include "engine/bench/serve_report.h"
#include "engine/bench/server_sent_events.h"
#include "runtime/check.h"
#include "support/server_process.h"
#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::bench;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

constexpr int32_t kRefusedToken = 13;

// POST /v1/completions streams max_tokens chunks of one character each, a millisecond apart;
// GET /v1/models lists "stand-in". A prompt holding kRefusedToken gets a 400 in OpenAI's form.
class StandInServer {
 public:
  StandInServer() {
    server_.Get("/v1/models", [](const httplib::Request&, httplib::Response& response) {
      response.set_content(R"({"object": "list", "data": [{"id": "stand-in", "object": "model"}]})",
                           "application/json");
    });
    server_.Post("/v1/completions",
                 [this](const httplib::Request& request, httplib::Response& response) {
                   complete(request, response);
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~StandInServer() {
    server_.stop();
    thread_.join();
  }

  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  int most_at_once() const { return most_at_once_; }
  void reset_most_at_once() { most_at_once_ = 0; }
  std::vector<json> bodies() const {
    std::lock_guard lock(mutex_);
    return bodies_;
  }

 private:
  void complete(const httplib::Request& request, httplib::Response& response) {
    const json body = json::parse(request.body);
    {
      std::lock_guard lock(mutex_);
      bodies_.push_back(body);
    }
    const json& prompt = body["prompt"];
    if (prompt.is_array() &&
        std::find(prompt.begin(), prompt.end(), json(kRefusedToken)) != prompt.end()) {
      response.status = 400;
      response.set_content(
          R"({"error": {"message": "prompt: token id 13 is refused", "type": "invalid_request_error", "param": "prompt", "code": null}})",
          "application/json");
      return;
    }
    const int64_t prompt_tokens = prompt.is_array()
                                      ? static_cast<int64_t>(prompt.size())
                                      : static_cast<int64_t>(prompt.get<std::string>().size());
    const int64_t tokens = body["max_tokens"].get<int64_t>();
    const std::string model = body["model"].get<std::string>();
    response.set_chunked_content_provider("text/event-stream", [this, tokens, prompt_tokens, model](
                                                                   size_t,
                                                                   httplib::DataSink& sink) {
      const int now = ++at_once_;
      int most = most_at_once_;
      while (now > most && !most_at_once_.compare_exchange_weak(most, now)) {
      }
      auto event = [&](const json& data) {
        const std::string text = "data: " + data.dump() + "\n\n";
        // In two writes cut mid-line, as a network may deliver it.
        sink.write(text.data(), text.size() / 2);
        sink.write(text.data() + text.size() / 2, text.size() - text.size() / 2);
      };
      auto choice = [&](const std::string& text, const json& finish) {
        return json{
            {"id", "cmpl-1"},
            {"object", "text_completion"},
            {"created", 0},
            {"model", model},
            {"choices",
             {{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}}}}};
      };
      for (int64_t i = 0; i < tokens; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        event(choice("w", nullptr));
      }
      event(choice("", "length"));
      event({{"id", "cmpl-1"},
             {"object", "text_completion"},
             {"created", 0},
             {"model", model},
             {"choices", json::array()},
             {"usage",
              {{"prompt_tokens", prompt_tokens},
               {"completion_tokens", tokens},
               {"total_tokens", prompt_tokens + tokens}}}});
      const std::string done = "data: [DONE]\n\n";
      sink.write(done.data(), done.size());
      --at_once_;
      sink.done();
      return true;
    });
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> at_once_{0}, most_at_once_{0};
  mutable std::mutex mutex_;
  std::vector<json> bodies_;
};

ServeOptions options_for(const StandInServer& server, std::vector<int64_t> concurrency,
                         std::vector<ServePrompt> prompts) {
  ServeOptions options;
  options.url = server.url();
  options.concurrency = std::move(concurrency);
  options.prompts = std::move(prompts);
  options.prompt_source = "test";
  options.timeout_seconds = 30;
  return options;
}

TEST(ServerSentEvents, EventsAcrossChunksLineEndingsAndComments) {
  std::vector<std::string> events;
  ServerSentEvents reader([&](const std::string& data) { events.push_back(data); });
  const std::string stream =
      ": a comment\r\ndata: {\"a\": 1}\r\n\r\nevent: x\ndata: two\ndata:lines\n\nid: 7\n\n"
      "data: [DONE]\r\rdata: last";
  for (size_t i = 0; i < stream.size(); i += 3) reader.feed(std::string_view(stream).substr(i, 3));
  reader.finish();
  EXPECT_THAT(events, ElementsAre("{\"a\": 1}", "two\nlines", "[DONE]", "last"));
}

TEST(ServeLoad, StreamsEveryPromptAtEachConcurrency) {
  StandInServer server;
  ServeOptions options = options_for(server, {1, 4}, random_prompts(8, 5, 6, 13, 1));
  options.ignore_eos = true;
  ServeReport report = run_serve_benchmark(options);
  EXPECT_EQ(report.options.model, "stand-in");  // from GET /v1/models
  ASSERT_EQ(report.levels.size(), 2u);
  for (const ServeLevel& level : report.levels) {
    EXPECT_EQ(level.completed, 8);
    EXPECT_EQ(level.failed, 0) << (level.errors.empty() ? "" : level.errors.front());
    EXPECT_EQ(level.input_tokens, 8 * 5);  // from the usage chunk
    EXPECT_EQ(level.output_tokens, 8 * 6);
    EXPECT_GT(level.duration_seconds, 0);
    EXPECT_NEAR(level.request_throughput, 8 / level.duration_seconds, 1e-9);
    EXPECT_NEAR(level.output_throughput, 48 / level.duration_seconds, 1e-9);
    EXPECT_GT(level.ttft_ms.median, 0);
    EXPECT_GE(level.ttft_ms.p99, level.ttft_ms.median);
    EXPECT_GT(level.itl_ms.mean, 0);  // about a millisecond between chunks
    EXPECT_GT(level.tpot_ms.mean, 0);
    EXPECT_GE(level.e2e_ms.median, level.ttft_ms.median);
  }
  // The requests were OpenAI streaming completions of token-id prompts.
  const json body = server.bodies().back();
  EXPECT_EQ(body["model"], "stand-in");
  EXPECT_TRUE(body["stream"].get<bool>());
  EXPECT_TRUE(body["stream_options"]["include_usage"].get<bool>());
  EXPECT_TRUE(body["ignore_eos"].get<bool>());
  EXPECT_EQ(body["max_tokens"], 6);
  EXPECT_EQ(body["prompt"].size(), 5u);
  EXPECT_EQ(server.bodies().size(), 1u + 2 * 8);  // the test request, then two levels

  const json document = json::parse(serve_json(report));
  EXPECT_EQ(document["schema"], "tessera-serve/1");
  ASSERT_EQ(document["levels"].size(), 2u);
  EXPECT_EQ(document["levels"][1]["concurrency"], 4);
  EXPECT_EQ(document["levels"][1]["completed"], 8);
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
    for (const char* statistic : {"mean", "median", "p90", "p99"})
      EXPECT_GT(document["levels"][0][key][statistic].get<double>(), 0) << key << statistic;
  const std::string table = serve_table(report);
  EXPECT_THAT(table, HasSubstr("output tokens/s"));
  EXPECT_THAT(table, HasSubstr("TTFT ms p99"));
}

TEST(ServeLoad, NeverHasMoreRequestsInFlightThanTheConcurrency) {
  StandInServer server;
  ServeOptions options = options_for(server, {1}, random_prompts(6, 3, 8, 13, 2));
  run_serve_benchmark(options);
  EXPECT_EQ(server.most_at_once(), 1);
  server.reset_most_at_once();
  options.concurrency = {3};
  options.model = "stand-in";
  options.request_rate = 200.0;  // Poisson arrivals, still at most 3 in flight
  ServeReport report = run_serve_benchmark(options);
  EXPECT_LE(server.most_at_once(), 3);
  EXPECT_GE(server.most_at_once(), 1);
  EXPECT_EQ(report.levels.at(0).completed, 6);
}

TEST(ServeLoad, FailedRequestsAreCountedWithTheServersMessage) {
  StandInServer server;
  std::vector<ServePrompt> prompts = random_prompts(4, 3, 2, 13, 3);
  prompts[2].token_ids[1] = kRefusedToken;
  ServeReport report = run_serve_benchmark(options_for(server, {2}, prompts));
  const ServeLevel& level = report.levels.at(0);
  EXPECT_EQ(level.completed, 3);
  EXPECT_EQ(level.failed, 1);
  ASSERT_EQ(level.errors.size(), 1u);
  EXPECT_THAT(level.errors[0], HasSubstr("HTTP 400: prompt: token id 13 is refused"));
  EXPECT_THAT(serve_table(report), HasSubstr("token id 13 is refused"));
}

TEST(ServeLoad, NoServerIsAnErrorNamingTheUrl) {
  std::string url;
  {
    StandInServer closed;  // a port that was free a moment ago and has no listener now
    url = closed.url();
  }
  ServeOptions options;
  options.url = url;
  options.model = "stand-in";
  options.timeout_seconds = 5;
  options.prompts = random_prompts(1, 2, 2, 13, 4);
  try {
    run_serve_benchmark(options);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("the test request to " + url));
  }
  options.url = url + "/v1";
  EXPECT_THROW(run_serve_benchmark(options), Error);  // the path belongs in --endpoint
}

TEST(ServeLoad, PromptFilesHoldTextOrIdsWithOptionalMaxTokens) {
  const std::string directory = tessera::testing::fresh_temp_dir("serve_prompts");
  std::filesystem::create_directories(directory);
  const std::string path = directory + "/prompts.jsonl";
  std::ofstream(path) << R"({"prompt": "Once upon a time", "max_tokens": 3})"
                      << "\n\n"
                      << R"({"prompt": [1, 2, 3]})"
                      << "\n";
  std::vector<ServePrompt> prompts = read_prompt_file(path, 2, 9);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[0].text, "Once upon a time");
  EXPECT_EQ(prompts[0].max_tokens, 3);
  EXPECT_THAT(prompts[1].token_ids, ElementsAre(1, 2, 3));
  EXPECT_EQ(prompts[1].max_tokens, 9);
  auto error_of = [&](const std::string& line, int64_t count) {
    std::ofstream(path) << line << "\n";
    try {
      read_prompt_file(path, count, 9);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of(R"({"prompt": "a"})", 2), HasSubstr("holds 1 prompts, fewer than"));
  EXPECT_THAT(error_of("not json", 1), HasSubstr("line 1: not a JSON object"));
  EXPECT_THAT(error_of(R"({"text": "a"})", 1), HasSubstr("no \"prompt\""));
  EXPECT_THAT(error_of(R"({"prompt": [1, -2]})", 1), HasSubstr("not a token id"));
  EXPECT_THAT(error_of(R"({"prompt": "a", "max_tokens": 0})", 1), HasSubstr("\"max_tokens\""));

  // Text prompts reach the server as text.
  StandInServer server;
  std::ofstream(path) << R"({"prompt": "Once upon a time", "max_tokens": 3})"
                      << "\n";
  ServeReport report = run_serve_benchmark(options_for(server, {1}, read_prompt_file(path, 1, 9)));
  EXPECT_EQ(report.levels.at(0).completed, 1);
  EXPECT_EQ(report.levels.at(0).input_tokens, 16);  // the stand-in counts characters
  EXPECT_EQ(server.bodies().back()["prompt"], "Once upon a time");
  std::filesystem::remove_all(directory);
}

TEST(ServeLoad, TheBinaryAgainstTesseraServeOfStories260K) {
  const std::string models = std::string(TESSERA_SHARED_DIR) + "/models/stories260K";
  tessera::testing::ServerProcess server(TESSERA_BINARY, {"--model", models + "/stories260K.bin",
                                                          "--tokenizer", models + "/tok512.bin"});
  const std::string url = server.url();

  const std::string directory = tessera::testing::fresh_temp_dir("bench_serve_real");
  std::filesystem::create_directories(directory);
  const std::string json_path = directory + "/serve.json";
  tessera::testing::CommandResult bench = tessera::testing::run_shell(
      fmt::format("'{}' bench serve --url {} --concurrency 1,4 --num-prompts 8 --input-len 12 "
                  "--output-len 10 --ignore-eos --json '{}'",
                  TESSERA_BINARY, url, json_path),
      true);
  ASSERT_EQ(bench.status, 0) << bench.output << bench.error_output << server.stderr_text();
  EXPECT_THAT(bench.output, HasSubstr("=== tessera bench serve: " + url));
  EXPECT_THAT(bench.output, HasSubstr("output tokens/s"));
  std::ifstream file(json_path);
  const json report = json::parse(file);
  EXPECT_EQ(report["schema"], "tessera-serve/1");
  EXPECT_THAT(report["model"].get<std::string>(), HasSubstr("stories260K.bin"));
  ASSERT_EQ(report["levels"].size(), 2u);
  for (const json& level : report["levels"]) {
    EXPECT_EQ(level["completed"], 8) << level.dump();
    EXPECT_EQ(level["failed"], 0) << level.dump();
    EXPECT_EQ(level["input_tokens"], 8 * 12);  // the server's usage
    EXPECT_EQ(level["output_tokens"], 8 * 10);
    EXPECT_GT(level["output_throughput"].get<double>(), 0);
    EXPECT_GT(level["ttft_ms"]["median"].get<double>(), 0);
    EXPECT_GT(level["itl_ms"]["median"].get<double>(), 0);
    EXPECT_GE(level["e2e_ms"]["p99"].get<double>(), level["ttft_ms"]["p99"].get<double>());
  }
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();  // SIGTERM: a clean exit
  std::filesystem::remove_all(directory);
}

}  // namespace
