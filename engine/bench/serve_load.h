// The serving benchmark's load generator (vLLM's serving benchmark, in C++): streams completions
// from an OpenAI-compatible server (POST /v1/completions, "stream": true, server-sent events) with
// a bounded number of clients in flight and, optionally, Poisson arrivals at a request rate, and
// measures per request the time to first token, the gaps between streamed chunks (inter-token
// latency) and the end-to-end latency; per concurrency level the request and token throughput.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/bench/statistics.h"

namespace tessera::bench {

struct ServePrompt {
  std::string text;                // a text prompt, or
  std::vector<int32_t> token_ids;  // a token-id prompt (when text is empty)
  int64_t max_tokens = 0;
};

struct ServeOptions {
  std::string url = "http://127.0.0.1:8000";  // scheme://host:port
  std::string endpoint = "/v1/completions";
  std::string model;    // the request's "model"; empty: the first of GET /v1/models
  std::string api_key;  // sent as "Authorization: Bearer KEY" when set
  std::vector<int64_t> concurrency{1, 16, 64};
  int64_t num_prompts = 100;
  std::optional<double> request_rate;  // requests/s, Poisson arrivals; none: all at once
  bool ignore_eos = false;             // vLLM's extension: generate max_tokens exactly
  uint64_t seed = 0;                   // arrivals and random prompts
  double timeout_seconds = 600;        // per request
  std::vector<ServePrompt> prompts;    // num_prompts of them
  std::string prompt_source;           // "random: input 128, output 128" or the dataset's path
  // Fields added to every request's body (a JSON object's text, e.g. a response_format or
  // guided_json to measure structured output); empty: none.
  std::string extra_body;
};

// Random token-id prompts of input_len ids drawn uniformly from [0, vocab_size), each asking for
// output_len tokens.
std::vector<ServePrompt> random_prompts(int64_t count, int64_t input_len, int64_t output_len,
                                        int64_t vocab_size, uint64_t seed);
// The first `count` lines of a JSON-lines file: {"prompt": "text" or [ids], "max_tokens": N}
// (max_tokens optional: default_max_tokens). Errors name the file, the line and the field.
std::vector<ServePrompt> read_prompt_file(const std::string& path, int64_t count,
                                          int64_t default_max_tokens);

struct RequestResult {
  bool success = false;
  std::string error;
  double ttft_ms = 0;
  double e2e_ms = 0;
  std::vector<double> itl_ms;  // gaps between the chunks that carried a choice
  int64_t prompt_tokens = 0;   // the server's usage when sent, else the ids sent (0 for text)
  int64_t output_tokens = 0;   // the server's usage when sent, else chunks with a choice
};

struct ServeLevel {
  int64_t concurrency = 0;
  int64_t completed = 0, failed = 0;
  double duration_seconds = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Distribution ttft_ms, tpot_ms, itl_ms, e2e_ms;
  std::vector<std::string> errors;  // the first few distinct ones
};

struct ServeReport {
  ServeOptions options;  // model resolved
  std::string created, commit;
  std::vector<ServeLevel> levels;
};

// (requests done, requests in all) at the current level, after each request.
using ServeProgress = std::function<void(int64_t concurrency, int64_t done, int64_t total)>;

// One test request first (a server that does not answer is an Error naming the URL), then each
// concurrency level in turn over all the prompts.
ServeReport run_serve_benchmark(ServeOptions options, const ServeProgress& progress = {});

}  // namespace tessera::bench
