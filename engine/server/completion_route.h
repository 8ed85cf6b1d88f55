// The thin route layer of /v1/completions and /v1/chat/completions: parses the request
// (CompletionParser), fans it out into the engine (fan_out_choices), then writes, as the outputs
// come, the server-sent events (CompletionStream) or the whole response (CompletionAssembler)
// through an HttpResponseWriter. A client that goes away, streaming or not, has all its requests
// aborted at once, which frees their blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "engine/async_engine.h"
#include "engine/server/completion_parser.h"
#include "engine/server/http/http_response_writer.h"

namespace tessera {

class CompletionRoute {
 public:
  // `server_created`: the server's start (seconds), part of every response id.
  CompletionRoute(AsyncEngine& engine, CompletionParser parser, std::string served_model_name,
                  int64_t server_created);

  // Answers one request (blocks until its response is written or its client is gone).
  void handle(const std::string& body, HttpResponseWriter& writer, bool chat);

 private:
  ResponseContext response_context(const CompletionRequest& request);

  AsyncEngine& engine_;
  CompletionParser parser_;
  std::string served_model_name_;
  int64_t server_created_;
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace tessera
