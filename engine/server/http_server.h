// The OpenAI-compatible HTTP server (cpp-httplib): /v1/completions, /v1/chat/completions
// (streamed as server-sent events too), /v1/models, /health, /metrics, /version. HTTP threads
// parse and validate, enqueue into the AsyncEngine and write what its OutputStreams produce;
// a client that goes away has its requests aborted, which frees their KV blocks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/async_engine.h"
#include "engine/engine_config.h"
#include "engine/server/chat_template.h"
#include "engine/server/completion_route.h"
#include "models/tokenizer.h"

namespace httplib {
class Server;
}

namespace tessera {

// The address (host, port; 0: any free port, bind() says which) is the config's ServerConfig.
struct ServerOptions : ServerConfig {
  std::string api_key;  // empty: no authentication
  std::string served_model_name;
  size_t max_body_bytes = 8u << 20;
  int64_t max_waiting_requests = 1024;
  int http_threads = 160;         // connections served at once
  int read_timeout_seconds = 30;  // a client that sends its request slower is dropped
  int write_timeout_seconds = 30;
};

class OpenAIServer {
 public:
  OpenAIServer(AsyncEngine& engine, const Tokenizer& tokenizer, ChatTemplate chat_template,
               ServerOptions options);
  ~OpenAIServer();

  // Binds host:port; returns the port. Throws tessera::Error naming the address on failure.
  int bind();
  void run();  // serves until stop()
  // Waits (up to `timeout`) until every response in flight has been written; for a graceful
  // stop, after the engine has finished or aborted their requests.
  void wait_for_responses(std::chrono::milliseconds timeout);
  // Closes the listening socket and ends run(); responses still being written are cut off.
  void stop();

 private:
  void install_routes();

  AsyncEngine& engine_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<int64_t> responses_in_flight_{0};
  int64_t created_ = 0;
  CompletionRoute completion_route_;
};

}  // namespace tessera
