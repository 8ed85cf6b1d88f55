#include "engine/server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>
#include <unordered_map>

#include "engine/server/openai_protocol.h"
#include "runtime/check.h"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif

namespace tessera {
namespace {

using nlohmann::json;
constexpr auto poll_interval = std::chrono::milliseconds(200);

void send_error(httplib::Response& response, const ApiError& error) {
  response.status = error.status;
  response.set_content(dump_json(error.body()), "application/json");
}

// A tessera::Error's message starts with the field it is about ("max_tokens: ...",
// "temperature must be ..."): that word is the error's param when it is a request field.
std::string param_of(const std::string& message) {
  static const char* fields[] = {"prompt",
                                 "max_tokens",
                                 "temperature",
                                 "top_p",
                                 "top_k",
                                 "min_p",
                                 "n",
                                 "stop",
                                 "stop_token_ids",
                                 "logprobs",
                                 "presence_penalty",
                                 "frequency_penalty",
                                 "repetition_penalty",
                                 "messages"};
  for (const char* field : fields) {
    std::string name(field);
    if (message.size() > name.size() && message.compare(0, name.size(), name) == 0 &&
        (message[name.size()] == ':' || message[name.size()] == ' '))
      return name;
  }
  return "";
}

// One HTTP response's view of its engine requests (one per prompt and n).
struct ResponseState {
  ResponseContext context;
  bool stream = false;
  bool include_usage = false;
  std::shared_ptr<OutputStream> outputs;
  std::vector<std::string> request_ids;
  std::unordered_map<std::string, size_t> index_of;
  std::vector<ChoiceState> choices;
  size_t finished = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  std::string error;  // the first engine error
  bool done = false;

  json usage() const { return usage_json(prompt_tokens, completion_tokens, cached_tokens); }
};

bool write(httplib::DataSink& sink, const std::string& text) {
  return sink.write(text.data(), text.size());
}

}  // namespace

OpenAIServer::OpenAIServer(AsyncEngine& engine, const Tokenizer& tokenizer,
                           ChatTemplate chat_template, ServerOptions options)
    : engine_(engine),
      tokenizer_(tokenizer),
      chat_template_(chat_template),
      options_(std::move(options)),
      server_(std::make_unique<httplib::Server>()),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
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
  auto completion = [this](bool chat) {
    return [this, chat](const httplib::Request& http_request, httplib::Response& response) {
      std::vector<std::string> added;
      try {
        json body = parse_request_body(http_request.body);
        PromptLimits limits;
        limits.vocab_size = engine_.engine().tokenizer().vocab_size();
        limits.vocab_size = std::min<int64_t>(limits.vocab_size, engine_.engine().vocab_size());
        limits.max_model_len = engine_.engine().max_model_len();
        CompletionRequest request =
            parse_completion_request(body, chat, tokenizer_, chat_template_, limits);
        if (request.model != options_.served_model_name)
          throw ApiError(404, fmt::format("The model `{}` does not exist.", request.model), "model",
                         "invalid_request_error", "model_not_found");
        auto state = std::make_shared<ResponseState>();
        state->context.chat = chat;
        state->context.id = fmt::format("{}{:016x}", chat ? "chatcmpl-" : "cmpl-",
                                        (static_cast<uint64_t>(created_) << 24) ^ next_id_++);
        state->context.created = std::chrono::duration_cast<std::chrono::seconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count();
        state->context.model = options_.served_model_name;
        state->context.logprobs = request.params.logprobs;
        state->context.tokenizer = &tokenizer_;
        state->stream = request.stream;
        state->include_usage = request.include_usage;
        state->outputs = std::make_shared<OutputStream>();
        const int64_t n = request.params.n;
        for (const std::vector<int32_t>& prompt : request.prompts) {
          state->prompt_tokens += static_cast<int64_t>(prompt.size());
          for (int64_t i = 0; i < n; ++i) {
            SamplingParams params = request.params;
            params.n = 1;
            if (params.seed) params.seed = derive_seed(*params.seed, static_cast<uint64_t>(i));
            if (!request.max_tokens_given) {
              const int64_t room = limits.max_model_len - static_cast<int64_t>(prompt.size());
              params.max_tokens = chat ? room : std::min<int64_t>(16, room);
            }
            std::string id = fmt::format("{}-{}", state->context.id, state->choices.size());
            state->index_of[id] = state->choices.size();
            state->choices.emplace_back();
            engine_.add_request(id, prompt, params, state->outputs);
            added.push_back(id);
          }
        }
        state->request_ids = added;
        const size_t total = state->choices.size();
        auto provider = [state, total](size_t, httplib::DataSink& sink) {
          std::optional<RequestOutput> output = state->outputs->pop(poll_interval);
          if (!output)  // nothing new: probe the client, so a closed connection is noticed
            return write(sink, state->stream ? ": keep-alive\n\n" : " ");
          ChoiceState& choice = state->choices.at(state->index_of.at(output->request_id));
          choice.text += output->text;
          choice.token_ids.insert(choice.token_ids.end(), output->token_ids.begin(),
                                  output->token_ids.end());
          choice.logprobs.insert(choice.logprobs.end(), output->logprobs.begin(),
                                 output->logprobs.end());
          if (output->finished()) {
            choice.finish_reason = output->finish_reason;
            choice.stop_reason = output->stop_reason;
            ++state->finished;
            state->completion_tokens += output->completion_tokens;
            state->cached_tokens += output->cached_tokens;
            if (output->finish_reason == FinishReason::error && state->error.empty())
              state->error = output->error;
          }
          if (state->stream) {
            if (output->finish_reason == FinishReason::error) {
              ApiError error(500, "the request failed: " + output->error, "", "internal_error");
              if (!write(sink, "data: " + dump_json(error.body()) + "\n\n")) return false;
            } else {
              const size_t index = state->index_of.at(output->request_id);
              const bool first = !choice.started;
              choice.started = true;
              json chunk = completion_chunk(state->context, index, *output, first);
              if (state->include_usage) chunk["usage"] = nullptr;
              if (!write(sink, "data: " + dump_json(chunk) + "\n\n")) return false;
            }
          }
          if (state->finished < total) return true;
          if (state->stream) {
            if (state->include_usage &&
                !write(sink,
                       "data: " + dump_json(usage_chunk(state->context, state->usage())) + "\n\n"))
              return false;
            if (!write(sink, "data: [DONE]\n\n")) return false;
          } else if (!state->error.empty()) {
            ApiError error(500, "the request failed: " + state->error, "", "internal_error");
            if (!write(sink, dump_json(error.body()))) return false;
          } else {
            json whole = completion_response(state->context, state->choices, state->usage());
            if (!write(sink, dump_json(whole))) return false;
          }
          state->done = true;
          sink.done();
          return true;
        };
        auto release = [this, state](bool) {
          --responses_in_flight_;
          if (state->finished == state->choices.size()) return;
          // The client went away (or the write failed): its requests stop and free their blocks.
          for (const std::string& id : state->request_ids) engine_.abort(id);
        };
        ++responses_in_flight_;
        response.set_chunked_content_provider(
            request.stream ? "text/event-stream" : "application/json", provider, release);
        if (request.stream) response.set_header("Cache-Control", "no-cache");
      } catch (const ApiError& error) {
        for (const std::string& id : added) engine_.abort(id);
        send_error(response, error);
      } catch (const EngineOverloaded& error) {
        for (const std::string& id : added) engine_.abort(id);
        response.set_header("Retry-After", "1");
        send_error(response, ApiError(503, error.what(), "", "server_overloaded"));
      } catch (const Error& error) {
        for (const std::string& id : added) engine_.abort(id);
        send_error(response, ApiError(400, error.what(), param_of(error.what())));
      }
    };
  };
  server.Post("/v1/completions", completion(false));
  server.Post("/v1/chat/completions", completion(true));
}

}  // namespace tessera
