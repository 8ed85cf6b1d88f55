// The thin route layer of /v1/completions and /v1/chat/completions: parses the request
// (CompletionParser), fans it out into the engine (fan_out_choices), then writes, as the outputs
// come, the server-sent events (CompletionStream) or the whole response (CompletionAssembler)
// through cpp-httplib. A client that goes away has its requests aborted, which frees their blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "engine/async_engine.h"
#include "engine/server/completion_parser.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tessera {

class CompletionRoute {
 public:
  // `server_created`: the server's start (seconds), part of every response id.
  // `responses_in_flight`: counts the responses still being written.
  CompletionRoute(AsyncEngine& engine, CompletionParser parser, std::string served_model_name,
                  int64_t server_created, std::atomic<int64_t>& responses_in_flight);

  void handle(const httplib::Request& http_request, httplib::Response& response, bool chat);

 private:
  ResponseContext response_context(const CompletionRequest& request);

  AsyncEngine& engine_;
  CompletionParser parser_;
  std::string served_model_name_;
  int64_t server_created_;
  std::atomic<int64_t>& responses_in_flight_;
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace tessera
