#include "engine/bench/serve_load.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "engine/bench/machine_info.h"
#include "engine/bench/server_sent_events.h"
#include "runtime/check.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr size_t kErrorsKept = 5;
constexpr int64_t kTestRequestTokens = 16;

double milliseconds_between(Clock::time_point begin, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - begin).count();
}

// scheme://host[:port] with nothing after it but an optional "/" (the endpoint is separate).
void check_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  TESSERA_REQUIRE(scheme_end != std::string::npos &&
                      (url.starts_with("http://") || url.starts_with("https://")),
                  "--url {}: expected http://HOST:PORT or https://HOST:PORT", url);
  const size_t path = url.find('/', scheme_end + 3);
  TESSERA_REQUIRE(path == std::string::npos || path == url.size() - 1,
                  "--url {}: give the server's address only; the path goes in --endpoint "
                  "(default /v1/completions)",
                  url);
}

std::unique_ptr<httplib::Client> make_client(const ServeOptions& options) {
  std::string base = options.url;
  if (base.ends_with('/')) base.pop_back();
  auto client = std::make_unique<httplib::Client>(base);
  TESSERA_REQUIRE(client->is_valid(), "--url {}: not a usable address", options.url);
  const auto seconds = static_cast<time_t>(options.timeout_seconds);
  client->set_connection_timeout(std::min<time_t>(seconds, 10), 0);
  client->set_read_timeout(seconds, 0);
  client->set_write_timeout(seconds, 0);
  client->set_keep_alive(true);
  // Without it, Nagle's algorithm holds the request body back until the server acknowledges the
  // headers, which a delayed ACK postpones by tens of milliseconds: time to first token
  // would measure TCP.
  client->set_tcp_nodelay(true);
  if (!options.api_key.empty()) client->set_bearer_token_auth(options.api_key);
  return client;
}

// The OpenAI error body's message, else the body itself (cut short).
std::string error_message(int status, const std::string& body) {
  json parsed = json::parse(body, nullptr, false);
  if (!parsed.is_discarded() && parsed.is_object() && parsed.contains("error")) {
    const json& error = parsed["error"];
    if (error.is_object() && error.contains("message") && error["message"].is_string())
      return fmt::format("HTTP {}: {}", status, error["message"].get<std::string>());
  }
  return fmt::format("HTTP {}: {}", status, body.substr(0, 200));
}

std::string resolve_model(const ServeOptions& options) {
  auto client = make_client(options);
  auto response = client->Get("/v1/models");
  TESSERA_REQUIRE(response,
                  "GET {}/v1/models failed ({}): is the server running there? (or pass "
                  "--model NAME)",
                  options.url, httplib::to_string(response.error()));
  TESSERA_REQUIRE(response->status == 200, "GET {}/v1/models: {}; pass --model NAME", options.url,
                  error_message(response->status, response->body));
  json models = json::parse(response->body, nullptr, false);
  TESSERA_REQUIRE(!models.is_discarded() && models.contains("data") && models["data"].is_array() &&
                      !models["data"].empty() && models["data"][0].contains("id") &&
                      models["data"][0]["id"].is_string(),
                  "GET {}/v1/models did not list a model ({}); pass --model NAME", options.url,
                  response->body.substr(0, 200));
  return models["data"][0]["id"].get<std::string>();
}

RequestResult send_request(httplib::Client& client, const ServeOptions& options,
                           const ServePrompt& prompt) {
  json body = {{"model", options.model},
               {"max_tokens", prompt.max_tokens},
               {"temperature", 0.0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (prompt.text.empty()) {
    body["prompt"] = prompt.token_ids;
  } else {
    body["prompt"] = prompt.text;
  }
  if (options.ignore_eos) body["ignore_eos"] = true;
  if (!options.extra_body.empty()) {
    const json extra = json::parse(options.extra_body);
    for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  }

  RequestResult result;
  int status = 0;
  std::string error_body, stream_error;
  bool done = false;
  int64_t choice_chunks = 0;
  std::optional<int64_t> usage_prompt, usage_completion;
  std::optional<Clock::time_point> first_chunk, last_chunk;
  const auto start = Clock::now();
  ServerSentEvents events([&](const std::string& data) {
    if (data == "[DONE]") {
      done = true;
      return;
    }
    const auto now = Clock::now();
    json chunk = json::parse(data, nullptr, false);
    if (chunk.is_discarded() || !chunk.is_object()) {
      if (stream_error.empty())
        stream_error = "a streamed event is not JSON: " + data.substr(0, 100);
      return;
    }
    if (chunk.contains("error")) {
      if (stream_error.empty()) stream_error = error_message(200, data);
      return;
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      const json& usage = chunk["usage"];
      if (usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number_integer())
        usage_prompt = usage["prompt_tokens"].get<int64_t>();
      if (usage.contains("completion_tokens") && usage["completion_tokens"].is_number_integer())
        usage_completion = usage["completion_tokens"].get<int64_t>();
    }
    // As vLLM's benchmark counts: every chunk with a choice is a token's arrival, its text
    // empty or not (a server holds back text that is not yet whole UTF-8).
    if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty())
      return;
    if (!first_chunk) first_chunk = now;
    if (last_chunk) result.itl_ms.push_back(milliseconds_between(*last_chunk, now));
    last_chunk = now;
    ++choice_chunks;
  });
  httplib::Request request;
  request.method = "POST";
  request.path = options.endpoint;
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.set_header("Accept", "text/event-stream");
  // Compressed, a stream would arrive in bursts as the compressor flushes (cpp-httplib asks for
  // gzip or brotli unless told).
  request.set_header("Accept-Encoding", "identity");
  request.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (status == 200) {
      events.feed(std::string_view(data, length));
    } else {
      error_body.append(data, length);
    }
    return true;
  };
  httplib::Result response = client.send(request);
  const auto end = Clock::now();
  result.e2e_ms = milliseconds_between(start, end);
  if (!response) {
    result.error = fmt::format("request failed: {}", httplib::to_string(response.error()));
    return result;
  }
  if (status != 200) {
    result.error = error_message(status, error_body);
    return result;
  }
  events.finish();
  if (!stream_error.empty()) {
    result.error = stream_error;
  } else if (!done) {
    result.error = "the stream ended without \"data: [DONE]\"";
  } else if (!first_chunk) {
    result.error = "the stream carried no completion";
  } else {
    result.success = true;
    result.ttft_ms = milliseconds_between(start, *first_chunk);
    result.output_tokens = usage_completion.value_or(choice_chunks);
    result.prompt_tokens = usage_prompt.value_or(static_cast<int64_t>(prompt.token_ids.size()));
  }
  return result;
}

ServeLevel summarize(int64_t concurrency, double seconds,
                     const std::vector<RequestResult>& results) {
  ServeLevel level;
  level.concurrency = concurrency;
  level.duration_seconds = seconds;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestResult& result : results) {
    if (!result.success) {
      ++level.failed;
      if (level.errors.size() < kErrorsKept &&
          std::find(level.errors.begin(), level.errors.end(), result.error) == level.errors.end())
        level.errors.push_back(result.error);
      continue;
    }
    ++level.completed;
    level.input_tokens += result.prompt_tokens;
    level.output_tokens += result.output_tokens;
    ttft.push_back(result.ttft_ms);
    e2e.push_back(result.e2e_ms);
    if (result.output_tokens > 1)
      tpot.push_back((result.e2e_ms - result.ttft_ms) /
                     static_cast<double>(result.output_tokens - 1));
    itl.insert(itl.end(), result.itl_ms.begin(), result.itl_ms.end());
  }
  const double duration = std::max(seconds, 1e-9);
  level.request_throughput = static_cast<double>(level.completed) / duration;
  level.output_throughput = static_cast<double>(level.output_tokens) / duration;
  level.total_token_throughput =
      static_cast<double>(level.input_tokens + level.output_tokens) / duration;
  level.ttft_ms = Distribution::of(ttft);
  level.tpot_ms = Distribution::of(tpot);
  level.itl_ms = Distribution::of(itl);
  level.e2e_ms = Distribution::of(e2e);
  return level;
}

ServeLevel run_level(const ServeOptions& options, int64_t concurrency,
                     const ServeProgress& progress) {
  const auto count = static_cast<int64_t>(options.prompts.size());
  std::vector<double> arrival_seconds(options.prompts.size(), 0.0);
  if (options.request_rate) {
    std::mt19937_64 generator(options.seed);
    std::exponential_distribution<double> gap(*options.request_rate);
    double time = 0;
    for (double& arrival : arrival_seconds) {
      arrival = time;
      time += gap(generator);
    }
  }
  std::vector<RequestResult> results(options.prompts.size());
  std::atomic<int64_t> next{0};
  int64_t done = 0;
  std::mutex progress_mutex;
  const auto start = Clock::now();
  auto client_loop = [&] {
    auto client = make_client(options);
    for (int64_t i = next++; i < count; i = next++) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(arrival_seconds[i])));
      results[i] = send_request(*client, options, options.prompts[i]);
      std::lock_guard lock(progress_mutex);
      ++done;
      if (progress) progress(concurrency, done, count);
    }
  };
  std::vector<std::thread> clients;
  for (int64_t c = 0; c < std::min(concurrency, count); ++c) clients.emplace_back(client_loop);
  for (std::thread& client : clients) client.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return summarize(concurrency, seconds, results);
}

}  // namespace

std::vector<ServePrompt> random_prompts(int64_t count, int64_t input_len, int64_t output_len,
                                        int64_t vocab_size, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab_size - 1));
  std::vector<ServePrompt> prompts(static_cast<size_t>(count));
  for (ServePrompt& prompt : prompts) {
    prompt.token_ids.resize(static_cast<size_t>(input_len));
    for (int32_t& id : prompt.token_ids) id = token(generator);
    prompt.max_tokens = output_len;
  }
  return prompts;
}

std::vector<ServePrompt> read_prompt_file(const std::string& path, int64_t count,
                                          int64_t default_max_tokens) {
  std::ifstream file(path);
  TESSERA_REQUIRE(file.good(), "--dataset {}: cannot open the file", path);
  std::vector<ServePrompt> prompts;
  std::string line;
  int64_t number = 0;
  while (static_cast<int64_t>(prompts.size()) < count && std::getline(file, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json entry = json::parse(line, nullptr, false);
    TESSERA_REQUIRE(!entry.is_discarded() && entry.is_object(),
                    "--dataset {}, line {}: not a JSON object", path, number);
    TESSERA_REQUIRE(entry.contains("prompt"), "--dataset {}, line {}: no \"prompt\"", path, number);
    ServePrompt prompt;
    const json& text = entry["prompt"];
    if (text.is_string()) {
      prompt.text = text.get<std::string>();
      TESSERA_REQUIRE(!prompt.text.empty(), "--dataset {}, line {}: \"prompt\" is empty", path,
                      number);
    } else {
      TESSERA_REQUIRE(text.is_array() && !text.empty(),
                      "--dataset {}, line {}: \"prompt\" must be a string or a non-empty array of "
                      "token ids",
                      path, number);
      for (const json& id : text) {
        TESSERA_REQUIRE(
            id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX,
            "--dataset {}, line {}: \"prompt\" holds {}, not a token id", path, number, id.dump());
        prompt.token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
    }
    prompt.max_tokens = default_max_tokens;
    if (entry.contains("max_tokens")) {
      const json& tokens = entry["max_tokens"];
      TESSERA_REQUIRE(tokens.is_number_integer() && tokens.get<int64_t>() >= 1 &&
                          tokens.get<int64_t>() <= (int64_t{1} << 24),
                      "--dataset {}, line {}: \"max_tokens\" must be an integer in [1, {}]", path,
                      number, int64_t{1} << 24);
      prompt.max_tokens = tokens.get<int64_t>();
    }
    prompts.push_back(std::move(prompt));
  }
  TESSERA_REQUIRE(static_cast<int64_t>(prompts.size()) == count,
                  "--dataset {} holds {} prompts, fewer than --num-prompts {}", path,
                  prompts.size(), count);
  return prompts;
}

ServeReport run_serve_benchmark(ServeOptions options, const ServeProgress& progress) {
  check_url(options.url);
  TESSERA_REQUIRE(options.endpoint.starts_with("/"),
                  "--endpoint {}: expected a path like "
                  "/v1/completions",
                  options.endpoint);
  TESSERA_CHECK(!options.prompts.empty(), "no prompts to send");
  if (options.model.empty()) options.model = resolve_model(options);
  {  // a test request: the server answers, and the first request's set-up is not timed
    ServePrompt test = options.prompts.front();
    test.max_tokens = std::min(test.max_tokens, kTestRequestTokens);
    auto client = make_client(options);
    RequestResult result = send_request(*client, options, test);
    TESSERA_REQUIRE(result.success, "the test request to {}{} failed: {}", options.url,
                    options.endpoint, result.error);
  }
  ServeReport report;
  report.created = utc_timestamp();
  report.commit = source_commit();
  for (int64_t concurrency : options.concurrency)
    report.levels.push_back(run_level(options, concurrency, progress));
  report.options = std::move(options);
  return report;
}

}  // namespace tessera::bench
