// The OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions (streamed as
// server-sent events too), /v1/models, /health, /metrics, /version, on the event-driven
// HttpFrontEnd. The completion routes run on its handler pool: they parse and validate, enqueue
// into the AsyncEngine and write what its OutputStreams produce; a client that goes away has its
// requests aborted, which frees their KV blocks. The other routes answer on the event loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/async_engine.h"
#include "engine/engine_config.h"
#include "engine/server/chat_template.h"
#include "engine/server/completion_route.h"
#include "engine/server/http/http_front_end.h"
#include "engine/server/http_router.h"
#include "engine/server/rejection_counts.h"
#include "models/tokenizer.h"

namespace tessera {

// The address (host, port; 0: any free port, bind() says which) is the config's ServerConfig.
struct ServerOptions : ServerConfig {
  std::string api_key;  // empty: no authentication
  std::string served_model_name;
  int64_t max_waiting_requests = 1024;
  HttpFrontEndOptions http;  // limits and deadlines (its host and port come from above)
};

class OpenAIServer {
 public:
  OpenAIServer(AsyncEngine& engine, const Tokenizer& tokenizer, ChatTemplate chat_template,
               ServerOptions options);
  ~OpenAIServer();

  // Binds host:port; returns the port. Throws tessera::Error naming the address on failure.
  int bind();
  void run();  // serves until drained
  // Stops accepting; requests still arriving are cut off at `deadline`, responses still being
  // written a second later (the engine's own grace ends their requests at `deadline`).
  void drain(std::chrono::steady_clock::time_point deadline);

 private:
  HttpDispatch route(const HttpRequest& request) const;
  void install_routes();

  AsyncEngine& engine_;
  ServerOptions options_;
  int64_t created_ = 0;
  CompletionRoute completion_route_;
  HttpRouter router_;
  RejectionCounts rejections_;
  std::unique_ptr<HttpFrontEnd> front_end_;
};

}  // namespace tessera
