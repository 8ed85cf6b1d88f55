#include "engine/server/http_server.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/server/api_key_check.h"
#include "engine/server/http_errors.h"
#include "engine/server/openai_protocol.h"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif

namespace tessera {
namespace {

using nlohmann::json;

// What a request may hold: ids the tokenizer and the model both have, and the model's length.
PromptLimits prompt_limits(const LLMEngine& engine) {
  PromptLimits limits;
  limits.vocab_size = std::min<int64_t>(engine.tokenizer().vocab_size(), engine.vocab_size());
  limits.logits_width = engine.vocab_size();
  limits.max_model_len = engine.max_model_len();
  limits.max_prompt_bytes = max_prompt_bytes(limits.max_model_len, engine.tokenizer());
  return limits;
}

}  // namespace

OpenAIServer::OpenAIServer(AsyncEngine& engine, const Tokenizer& tokenizer,
                           ChatTemplate chat_template, ServerOptions options)
    : engine_(engine),
      options_(std::move(options)),
      created_(unix_seconds_now()),
      completion_route_(
          engine,
          CompletionParser(tokenizer, std::move(chat_template), prompt_limits(engine.engine()),
                           options_.served_model_name),
          options_.served_model_name, created_) {
  install_routes();
  HttpFrontEndOptions http = options_.http;
  http.host = options_.host;
  http.port = options_.port;
  http.on_response = [this](int status) { rejections_.count(status); };
  front_end_ = std::make_unique<HttpFrontEnd>(
      http, [this](const HttpRequest& request) { return route(request); },
      [](HttpResponseWriter& writer, const HttpError& error) {
        send_error(writer, ApiError(error.status, error.message));
      });
}

OpenAIServer::~OpenAIServer() = default;

int OpenAIServer::bind() {
  return front_end_->bind();
}

void OpenAIServer::run() {
  front_end_->run();
}

void OpenAIServer::drain(std::chrono::steady_clock::time_point deadline) {
  front_end_->drain(deadline);
}

HttpDispatch OpenAIServer::route(const HttpRequest& request) const {
  if (!options_.api_key.empty() && request.path.starts_with("/v1/")) {
    if (std::optional<ApiError> refused = check_api_key(request, options_.api_key))
      return {[error = *refused](const HttpRequest&, HttpResponseWriter& writer) {
        HttpHeaders headers;
        if (error.status == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
        send_error(writer, error, headers);
      }};
  }
  return router_.route(request);
}

void OpenAIServer::install_routes() {
  router_
      .add("GET", "/health",
           [](const HttpRequest&, HttpResponseWriter& writer) { writer.send(200, "", ""); })
      .add("GET", "/version",
           [](const HttpRequest&, HttpResponseWriter& writer) {
             writer.send(200, "application/json", dump_json(json{{"version", TESSERA_VERSION}}));
           })
      .add("GET", "/metrics",
           [this](const HttpRequest&, HttpResponseWriter& writer) {
             writer.send(200, "text/plain; version=0.0.4",
                         engine_.metrics().render_prometheus(options_.served_model_name) +
                             rejections_.render_prometheus(options_.served_model_name));
           })
      .add("GET", "/v1/models",
           [this](const HttpRequest&, HttpResponseWriter& writer) {
             json model = {{"id", options_.served_model_name},
                           {"object", "model"},
                           {"created", created_},
                           {"owned_by", "tessera"},
                           {"max_model_len", engine_.engine().max_model_len()}};
             writer.send(200, "application/json",
                         dump_json(json{{"object", "list"}, {"data", json::array({model})}}));
           })
      .add(
          "POST", "/v1/completions",
          [this](const HttpRequest& request, HttpResponseWriter& writer) {
            completion_route_.handle(request.body, writer, /*chat=*/false);
          },
          /*on_pool=*/true)
      .add(
          "POST", "/v1/chat/completions",
          [this](const HttpRequest& request, HttpResponseWriter& writer) {
            completion_route_.handle(request.body, writer, /*chat=*/true);
          },
          /*on_pool=*/true);
}

}  // namespace tessera
