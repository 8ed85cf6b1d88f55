#include "engine/server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "engine/server/http_errors.h"
#include "engine/server/openai_protocol.h"
#include "runtime/check.h"

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
  limits.max_model_len = engine.max_model_len();
  return limits;
}

}  // namespace

OpenAIServer::OpenAIServer(AsyncEngine& engine, const Tokenizer& tokenizer,
                           ChatTemplate chat_template, ServerOptions options)
    : engine_(engine),
      options_(std::move(options)),
      server_(std::make_unique<httplib::Server>()),
      created_(unix_seconds_now()),
      completion_route_(
          engine,
          CompletionParser(tokenizer, std::move(chat_template), prompt_limits(engine.engine()),
                           options_.served_model_name),
          options_.served_model_name, created_, responses_in_flight_) {
  const int threads = options_.http_threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options_.max_body_bytes);
  server_->set_read_timeout(options_.read_timeout_seconds, 0);
  server_->set_write_timeout(options_.write_timeout_seconds, 0);
  // Each streamed chunk leaves at once: with Nagle's algorithm a chunk waits for the client's
  // (delayed) acknowledgement of the one before, and tokens arrive in bursts.
  server_->set_tcp_nodelay(true);
  install_routes();
}

OpenAIServer::~OpenAIServer() = default;

int OpenAIServer::bind() {
  int listening_socket = -1;
  server_->set_socket_options([&listening_socket](socket_t socket) {
    int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening_socket = socket;
  });
  int port = options_.port;
  bool bound = port == 0 ? (port = server_->bind_to_any_port(options_.host)) > 0
                         : server_->bind_to_port(options_.host, port);
  TESSERA_REQUIRE(bound,
                  "cannot listen on http://{}:{}: the address is in use or not available here; "
                  "give another --port or --host",
                  options_.host, options_.port);
  // cpp-httplib listens with a backlog of 5; many clients connecting at once need more.
  if (listening_socket >= 0) ::listen(listening_socket, 1024);
  return port;
}

void OpenAIServer::run() {
  server_->listen_after_bind();
}

void OpenAIServer::wait_for_responses(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (responses_in_flight_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void OpenAIServer::stop() {
  server_->stop();
}

void OpenAIServer::install_routes() {
  httplib::Server& server = *server_;
  server.set_pre_routing_handler(
      [this](const httplib::Request& request, httplib::Response& response) {
        if (options_.api_key.empty() || !request.path.starts_with("/v1/"))
          return httplib::Server::HandlerResponse::Unhandled;
        if (request.get_header_value("Authorization") == "Bearer " + options_.api_key)
          return httplib::Server::HandlerResponse::Unhandled;
        send_error(response,
                   ApiError(401, "Incorrect or missing API key: send 'Authorization: Bearer KEY'",
                            "", "invalid_request_error", "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
      });
  server.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    std::string message =
        response.status == 404   ? fmt::format("no route {} {}", request.method, request.path)
        : response.status == 413 ? "the request body is larger than the server accepts"
                                 : fmt::format("HTTP error {}", response.status);
    send_error(response, ApiError(response.status, message));
  });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
        std::string message = "internal server error";
        try {
          if (error) std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message += std::string(": ") + e.what();
        } catch (...) {
        }
        spdlog::error("{}", message);
        send_error(response, ApiError(500, message, "", "internal_error"));
      });
  server.Get("/health",
             [](const httplib::Request&, httplib::Response& response) { response.status = 200; });
  server.Get("/version", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(dump_json(json{{"version", TESSERA_VERSION}}), "application/json");
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(engine_.metrics().render_prometheus(options_.served_model_name),
                         "text/plain; version=0.0.4");
  });
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& response) {
    json model = {{"id", options_.served_model_name},
                  {"object", "model"},
                  {"created", created_},
                  {"owned_by", "tessera"},
                  {"max_model_len", engine_.engine().max_model_len()}};
    response.set_content(dump_json(json{{"object", "list"}, {"data", json::array({model})}}),
                         "application/json");
  });
  server.Post("/v1/completions",
              [this](const httplib::Request& request, httplib::Response& response) {
                completion_route_.handle(request, response, /*chat=*/false);
              });
  server.Post("/v1/chat/completions",
              [this](const httplib::Request& request, httplib::Response& response) {
                completion_route_.handle(request, response, /*chat=*/true);
              });
}

}  // namespace tessera
