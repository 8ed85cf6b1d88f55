// `tessera serve`: the OpenAI-compatible HTTP server over the engine, continuous batching on its
// own thread. Startup logs the model and memory plan, then prints `listening on http://HOST:PORT`
// to stdout. SIGINT/SIGTERM stop admission, let running requests finish (aborting what is left
// after a grace period) and exit 0.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <pthread.h>

#include "engine/async_engine.h"
#include "engine/cli/command.h"
#include "engine/cli/flag_parser.h"
#include "engine/cli/model_flags.h"
#include "engine/runner/run_setup.h"
#include "engine/server/chat_template.h"
#include "engine/server/http_server.h"
#include "runtime/check.h"
#include "runtime/cpu/host_memory.h"

namespace tessera::cli {
namespace {

struct ServeOptions {
  ModelFlags model;
  std::string api_key;
  std::string served_model_name;
  int64_t max_waiting_requests = 1024;
  int64_t shutdown_grace_seconds = 30;
  int64_t max_connections = 8192;
  int64_t head_timeout_seconds = 10;
  int64_t body_timeout_seconds = 30;
  int64_t keep_alive_timeout_seconds = 15;
};

// Where serve's flags set config keys: --host, --port and --scheduling-policy (the model flags set
// theirs).
FlagSet serve_flags(ServeOptions& options) {
  FlagSet flags("serve");
  std::vector<std::string>* overrides = &options.model.overrides;
  flags
      .config_key({"--host", "", "ADDR", "address to bind (default 127.0.0.1)"}, "engine.host",
                  overrides)
      .add({"--port", "", "N", "port (default 8000; 0 picks a free one) (engine.port)"},
           "an integer in 0..65535",
           [overrides](const std::string& flag, const std::string& value) {
             overrides->push_back(
                 fmt::format("engine.port={}", parse_integer<int64_t>(flag, value, 0, 65535)));
           })
      .config_key({"--scheduling-policy", "", "P",
                   "fcfs (default) or priority: requests' \"priority\" field, lower first; a "
                   "waiting request preempts running ones of a lower priority"},
                  "engine.scheduling_policy", overrides)
      .text({"--api-key", "", "KEY",
             "require 'Authorization: Bearer KEY' on /v1 routes (default: $TESSERA_API_KEY when "
             "set)"},
            &options.api_key)
      .text({"--served-model-name", "", "NAME",
             "the model name clients send (default: the --model value)"},
            &options.served_model_name)
      .integer({"--max-waiting-requests", "", "N",
                "queued requests beyond which the server answers 503"},
               &options.max_waiting_requests, 1, 1 << 20)
      .integer(
          {"--shutdown-grace", "", "S", "on SIGINT/SIGTERM, seconds running requests may finish"},
          &options.shutdown_grace_seconds, 0, 3600)
      .integer({"--max-connections", "", "N",
                "open client connections at most (also capped by the open-file limit); at the "
                "limit the oldest one still sending its request is closed"},
               &options.max_connections, 1, 1 << 20)
      .integer({"--http-head-timeout", "", "S",
                "seconds a client has to send a request's line and headers (else 408)"},
               &options.head_timeout_seconds, 1, 3600)
      .integer({"--http-body-timeout", "", "S",
                "seconds a client has to send a request's body after its headers (else 408)"},
               &options.body_timeout_seconds, 1, 3600)
      .integer({"--http-keep-alive-timeout", "", "S",
                "seconds an idle keep-alive connection stays open"},
               &options.keep_alive_timeout_seconds, 1, 3600);
  declare_model_flags(flags, options.model);
  return flags;
}

ServeOptions parse(const std::vector<std::string>& args) {
  ServeOptions options;
  FlagSet flags = serve_flags(options);
  flags.parse(args);
  if (const char* key = std::getenv("TESSERA_API_KEY"); key != nullptr && !flags.given("--api-key"))
    options.api_key = key;
  return options;
}

int run_serve(const std::vector<std::string>& args) {
  // One arena, which malloc_trim can empty: handler threads keep no peak of their own (issue 36).
  limit_heap_arenas(1);
  ServeOptions options = parse(args);
  EngineConfig config = options.model.load();
  const ModelLoadConfig& engine_config = config.model;
  // Signals go to the watcher thread alone: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR2);  // sent by the main thread when the server stops by itself
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal

  auto tokenizer = load_run_tokenizer(engine_config);
  auto models = load_run_models(config);
  const std::shared_ptr<const CausalLM> model = models.front();
  std::unique_ptr<ModelExecutor> executor =
      make_model_executor(models, make_serving_runner_config(config, *model));
  ModelExecutor& runner = *executor;
  spdlog::info("model {} ({}), {} on {}, mode {}", engine_config.model,
               model->config().architecture, dtype_name(model->dtype()), model->device().str(),
               enum_name(runner.config().compilation.mode));
  spdlog::info("memory: {}", runner.memory_report());
  auto engine = std::make_unique<LLMEngine>(runner, *tokenizer, config);
  spdlog::info(
      "engine: KV cache {} blocks of {} tokens, max_model_len {}, max_num_seqs {}, "
      "max_num_batched_tokens {}, prefix caching {}, async scheduling {}",
      engine->kv_cache().num_blocks(), engine->kv_cache().block_size(), engine->max_model_len(),
      config.scheduler.max_num_seqs, config.scheduler.max_num_batched_tokens,
      config.cache.enable_prefix_caching ? "on" : "off",
      config.scheduler.async_scheduling ? "on" : "off");
  AsyncEngine async_engine(std::move(engine), options.max_waiting_requests);

  ServerOptions server_options;
  static_cast<ServerConfig&>(server_options) = config.server;  // the address
  server_options.api_key = options.api_key;
  server_options.served_model_name =
      options.served_model_name.empty() ? engine_config.model : options.served_model_name;
  server_options.max_waiting_requests = options.max_waiting_requests;
  server_options.http.max_connections = static_cast<size_t>(options.max_connections);
  server_options.http.head_timeout = std::chrono::seconds(options.head_timeout_seconds);
  server_options.http.body_timeout = std::chrono::seconds(options.body_timeout_seconds);
  server_options.http.keep_alive_timeout = std::chrono::seconds(options.keep_alive_timeout_seconds);
  ChatTemplate chat_template = ChatTemplate::detect(
      engine_config.tokenizer.empty() ? engine_config.model : engine_config.tokenizer);
  OpenAIServer server(async_engine, *tokenizer, chat_template, server_options);
  const int port = server.bind();
  spdlog::info("serving '{}' (chat template: {}){}", server_options.served_model_name,
               chat_template.name(), options.api_key.empty() ? "" : ", API key required");
  fmt::print("listening on http://{}:{}\n", server_options.host, port);
  std::fflush(stdout);

  const auto grace = std::chrono::seconds(options.shutdown_grace_seconds);
  std::atomic<bool> signalled{false};
  std::thread watcher([&] {
    int received = 0;
    sigwait(&signals, &received);
    if (received == SIGUSR2) return;  // the server stopped on its own
    signalled = true;
    spdlog::info("{}: no new requests; finishing running ones (at most {} s)",
                 received == SIGINT ? "SIGINT" : "SIGTERM", grace.count());
    // The listening socket closes now, idle connections too; new requests on open ones get 503.
    // At the deadline the engine aborts what still runs and the server closes what is left
    // (requests still arriving at once, aborted responses a second later).
    server.drain(std::chrono::steady_clock::now() + grace);
    async_engine.shutdown(grace);
  });
  server.run();
  // run() ends once drained, with the watcher's engine shutdown under way: wait for it.
  if (!signalled) pthread_kill(watcher.native_handle(), SIGUSR2);
  watcher.join();
  async_engine.shutdown(grace);
  spdlog::info("server stopped");
  return 0;
}

std::string usage() {
  ServeOptions defaults;
  return "usage: tessera serve [--model PATH] [--host 127.0.0.1] [--port 8000] [options]\n"
         "\n"
         "Serves the model over an OpenAI-compatible HTTP API: /v1/completions,\n"
         "/v1/chat/completions (stream: true as server-sent events), /v1/models, /health,\n"
         "/metrics (Prometheus), /version. Continuous batching under "
         "engine.max_num_batched_tokens\n"
         "and engine.max_num_seqs, prefix caching (engine.enable_prefix_caching).\n"
         "\n" +
         serve_flags(defaults).help();
}

TESSERA_REGISTER_COMMAND((Command{"serve", "serve a model over an OpenAI-compatible HTTP API",
                                  usage, run_serve}));

}  // namespace
}  // namespace tessera::cli
