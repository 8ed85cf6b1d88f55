#include "engine/server/completion_route.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "engine/server/choice_fan_out.h"
#include "engine/server/completion_assembler.h"
#include "engine/server/completion_stream.h"
#include "engine/server/http_errors.h"
#include "runtime/check.h"

namespace tessera {
namespace {

// How long a handler waits for an output before it checks on the client.
constexpr auto poll_interval = std::chrono::milliseconds(200);
// A body up to this size is sent whole, with its length; a larger one in chunks of it as it is
// made, so a huge response (n = 128 with logprobs) is never held in memory whole.
constexpr size_t whole_body_bytes = 256 << 10;

// The body of a response that is not streamed; false when the client went away.
bool send_body(const CompletionAssembler& assembler, HttpResponseWriter& writer) {
  const int status = assembler.failed() ? 500 : 200;
  std::string buffered;
  bool chunked = false;
  const bool written = assembler.write_body([&](std::string_view piece) {
    buffered += piece;
    if (buffered.size() < whole_body_bytes) return true;
    if (!chunked && !writer.begin_chunked(status, "application/json")) return false;
    chunked = true;
    const bool sent = writer.write_chunk(buffered);
    buffered.clear();
    return sent;
  });
  if (!written) return false;
  if (!chunked) return writer.send(status, "application/json", buffered);
  return (buffered.empty() || writer.write_chunk(buffered)) && writer.end_chunked();
}

// Writes the response as the outputs of `request_ids` come; false when the client went away
// before the end (the requests are then still running).
bool write_response(const CompletionRequest& request, OutputStream& outputs,
                    CompletionAssembler& assembler, size_t num_choices,
                    HttpResponseWriter& writer) {
  std::optional<CompletionStream> stream;
  if (request.stream) {
    stream.emplace(num_choices, request.include_usage);
    if (!writer.begin_chunked(200, "text/event-stream", {{"Cache-Control", "no-cache"}}))
      return false;
  }
  while (!assembler.finished()) {
    std::optional<RequestOutput> output = outputs.pop(poll_interval);
    if (writer.client_gone()) return false;
    if (!output) {
      // A comment keeps proxies from closing an idle stream.
      if (stream && !writer.write_chunk(CompletionStream::keep_alive)) return false;
      continue;
    }
    const size_t index = assembler.record(*output);
    if (stream && !writer.write_chunk(stream->event(*output, index, assembler))) return false;
  }
  if (stream) return writer.write_chunk(stream->closing_events(assembler)) && writer.end_chunked();
  return send_body(assembler, writer);
}

}  // namespace

CompletionRoute::CompletionRoute(AsyncEngine& engine, CompletionParser parser,
                                 std::string served_model_name, int64_t server_created)
    : engine_(engine),
      parser_(std::move(parser)),
      served_model_name_(std::move(served_model_name)),
      server_created_(server_created) {}

ResponseContext CompletionRoute::response_context(const CompletionRequest& request) {
  ResponseContext context;
  context.chat = request.chat;
  context.id = fmt::format("{}{:016x}", request.chat ? "chatcmpl-" : "cmpl-",
                           (static_cast<uint64_t>(server_created_) << 24) ^ next_id_++);
  context.created = unix_seconds_now();
  context.model = served_model_name_;
  context.logprobs = request.params.logprobs;
  context.tokenizer = &parser_.tokenizer();
  if (request.tools.active()) context.tools = std::make_shared<const ChatTools>(request.tools);
  context.template_kind = parser_.template_kind();
  return context;
}

void CompletionRoute::handle(const std::string& body, HttpResponseWriter& writer, bool chat) {
  std::vector<std::string> added;  // engine requests to abort when the request fails
  std::optional<ApiError> failure;
  HttpHeaders headers;
  try {
    const CompletionRequest request = parser_.parse(body, chat);
    if (request.grammar_compile_seconds > 0)
      engine_.observe_grammar_compile(request.grammar_compile_seconds);
    ResponseContext context = response_context(request);
    const std::vector<ChoiceRequest> choices =
        fan_out_choices(request, context.id, parser_.limits().max_model_len);
    int64_t prompt_tokens = 0;
    for (const std::vector<int32_t>& prompt : request.prompts)
      prompt_tokens += static_cast<int64_t>(prompt.size());
    std::vector<std::string> ids;
    for (const ChoiceRequest& choice : choices) ids.push_back(choice.id);
    // More sequences than the queue ever holds can never be served: not a retry-later 503.
    if (static_cast<int64_t>(choices.size()) > engine_.max_waiting_requests())
      throw ApiError(
          400,
          fmt::format("n: {} prompt(s) x n = {} sequences, more than the {} this "
                      "server queues at most (--max-waiting-requests); lower n or "
                      "send fewer prompts",
                      request.prompts.size(), choices.size(), engine_.max_waiting_requests()),
          "n");
    CompletionAssembler assembler(std::move(context), ids, prompt_tokens);
    auto outputs = std::make_shared<OutputStream>();
    std::vector<AsyncEngine::NewRequest> engine_requests;
    for (const ChoiceRequest& choice : choices)
      engine_requests.push_back(
          {choice.id, request.prompts[choice.prompt_index], choice.params, request.priority});
    engine_.add_requests(std::move(engine_requests), outputs);
    added = ids;
    if (!write_response(request, *outputs, assembler, choices.size(), writer)) {
      // The client went away: its requests stop and free their blocks.
      for (const std::string& id : added) engine_.abort(id);
    }
    return;
  } catch (const ApiError& error) {
    failure = error;
  } catch (const EngineOverloaded& error) {
    headers.emplace_back("Retry-After", "1");
    failure = ApiError(503, error.what(), "", "server_overloaded");
  } catch (const Error& error) {
    failure = invalid_request_error(error.what());
  }
  for (const std::string& id : added) engine_.abort(id);
  send_error(writer, *failure, headers);
}

}  // namespace tessera
