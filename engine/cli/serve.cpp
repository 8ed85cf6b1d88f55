// `tessera serve`: the OpenAI-compatible HTTP server over the engine, continuous batching on its
// own thread. Startup logs the model and memory plan, then prints `listening on http://HOST:PORT`
// to stdout. SIGINT/SIGTERM stop admission, let running requests finish (aborting what is left
// after a grace period) and exit 0.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <pthread.h>

#include "engine/async_engine.h"
#include "engine/cli/command.h"
#include "engine/cli/model_flags.h"
#include "engine/run_setup.h"
#include "engine/server/chat_template.h"
#include "engine/server/http_server.h"
#include "runtime/check.h"

namespace tessera::cli {
namespace {

struct ServeOptions {
  ModelFlags model;
  std::string api_key;
  std::string served_model_name;
  int64_t max_waiting_requests = 1024;
  int64_t shutdown_grace_seconds = 30;
};

int64_t parse_integer(const std::string& flag, const std::string& text, int64_t low, int64_t high) {
  const int64_t value = parse_number<int64_t>(flag, text);
  if (value < low || value > high)
    throw UsageError(
        fmt::format("{} expects an integer in {}..{}, got '{}'", flag, low, high, text));
  return value;
}

ServeOptions parse(const std::vector<std::string>& args) {
  ServeOptions options;
  if (const char* key = std::getenv("TESSERA_API_KEY")) options.api_key = key;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(fmt::format("{} needs a value", flag));
      return args[++i];
    };
    if (parse_model_flag(args, i, options.model)) continue;
    if (flag == "--host")
      options.model.overrides.push_back("engine.host=" + value());
    else if (flag == "--port")
      options.model.overrides.push_back(
          fmt::format("engine.port={}", parse_integer(flag, value(), 0, 65535)));
    else if (flag == "--api-key")
      options.api_key = value();
    else if (flag == "--served-model-name")
      options.served_model_name = value();
    else if (flag == "--max-waiting-requests")
      options.max_waiting_requests = parse_integer(flag, value(), 1, 1 << 20);
    else if (flag == "--shutdown-grace")
      options.shutdown_grace_seconds = parse_integer(flag, value(), 0, 3600);
    else
      throw UsageError(fmt::format("serve: unknown option '{}'", flag));
  }
  return options;
}

int run_serve(const std::vector<std::string>& args) {
  ServeOptions options = parse(args);
  RunConfig config = options.model.load();
  const EngineConfig& engine_config = config.engine;
  // Signals go to the watcher thread alone: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR2);  // sent by the main thread when the server stops by itself
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal

  auto tokenizer = load_run_tokenizer(engine_config);
  auto models = load_run_models(engine_config);
  const std::shared_ptr<const CausalLM> model = models.front();
  std::unique_ptr<ModelExecutor> executor =
      make_model_executor(models, make_serving_runner_options(config, *model));
  ModelExecutor& runner = *executor;
  spdlog::info("model {} ({}), {} on {}, mode {}", engine_config.model,
               model->config().architecture, dtype_name(model->dtype()), model->device().str(),
               runner.options().mode);
  spdlog::info("memory: {}", runner.memory_report());
  EngineOptions engine_options;
  engine_options.enable_prefix_caching = engine_config.enable_prefix_caching;
  engine_options.max_num_batched_tokens = engine_config.max_num_batched_tokens;
  engine_options.max_num_seqs = engine_config.max_num_seqs;
  engine_options.max_model_len = model->max_positions();
  engine_options.seed = static_cast<uint64_t>(engine_config.seed);
  engine_options.async_scheduling = engine_config.async_scheduling;
  auto engine = std::make_unique<LLMEngine>(runner, *tokenizer, engine_options);
  spdlog::info(
      "engine: KV cache {} blocks of {} tokens, max_model_len {}, max_num_seqs {}, "
      "max_num_batched_tokens {}, prefix caching {}, async scheduling {}",
      engine->kv_cache().num_blocks(), engine->kv_cache().block_size(), engine->max_model_len(),
      engine_config.max_num_seqs, engine_config.max_num_batched_tokens,
      engine_config.enable_prefix_caching ? "on" : "off",
      engine_config.async_scheduling ? "on" : "off");
  AsyncEngine async_engine(std::move(engine), options.max_waiting_requests);

  ServerOptions server_options;
  server_options.host = engine_config.host;
  server_options.port = static_cast<int>(engine_config.port);
  server_options.api_key = options.api_key;
  server_options.served_model_name =
      options.served_model_name.empty() ? engine_config.model : options.served_model_name;
  server_options.max_waiting_requests = options.max_waiting_requests;
  ChatTemplate chat_template = ChatTemplate::detect(
      engine_config.tokenizer.empty() ? engine_config.model : engine_config.tokenizer);
  OpenAIServer server(async_engine, *tokenizer, chat_template, server_options);
  const int port = server.bind();
  spdlog::info("serving '{}' (chat template: {}){}", server_options.served_model_name,
               chat_template.name(), options.api_key.empty() ? "" : ", API key required");
  fmt::print("listening on http://{}:{}\n", server_options.host, port);
  std::fflush(stdout);

  const auto grace = std::chrono::seconds(options.shutdown_grace_seconds);
  std::thread watcher([&] {
    int received = 0;
    sigwait(&signals, &received);
    if (received == SIGUSR2) return;  // the server stopped on its own
    spdlog::info("{}: no new requests; finishing running ones (at most {} s)",
                 received == SIGINT ? "SIGINT" : "SIGTERM", grace.count());
    // New requests get 503 from here on; the listening socket closes only once every answer is
    // written, because cpp-httplib cuts off responses in flight when it stops.
    async_engine.shutdown(grace);
    server.wait_for_responses(std::chrono::seconds(10));
    server.stop();
  });
  server.run();
  async_engine.shutdown(grace);
  pthread_kill(watcher.native_handle(), SIGUSR2);
  watcher.join();
  spdlog::info("server stopped");
  return 0;
}

const std::string kUsage =
    std::string(
        "usage: tessera serve [--model PATH] [--tokenizer PATH] [--host 127.0.0.1] [--port 8000]\n"
        "                     [--api-key KEY] [--served-model-name NAME] [options]\n"
        "\n"
        "Serves the model over an OpenAI-compatible HTTP API: /v1/completions,\n"
        "/v1/chat/completions (stream: true as server-sent events), /v1/models, /health,\n"
        "/metrics (Prometheus), /version. Continuous batching under engine.max_num_batched_tokens\n"
        "and engine.max_num_seqs, prefix caching (engine.enable_prefix_caching).\n"
        "\n"
        "options:\n"
        "  --host ADDR              address to bind (engine.host, default 127.0.0.1)\n"
        "  --port N                 port (engine.port, default 8000; 0 picks a free one)\n"
        "  --api-key KEY            require 'Authorization: Bearer KEY' on /v1 routes\n"
        "                           (default: $TESSERA_API_KEY when set)\n"
        "  --served-model-name NAME the model name clients send (default: the --model value)\n"
        "  --max-waiting-requests N queued requests beyond which the server answers 503 (1024)\n"
        "  --shutdown-grace S       on SIGINT/SIGTERM, seconds running requests may finish (30)\n"
        "\n") +
    kModelFlagsUsage;

TESSERA_REGISTER_COMMAND((Command{"serve", "serve a model over an OpenAI-compatible HTTP API",
                                  kUsage, run_serve}));

}  // namespace
}  // namespace tessera::cli
