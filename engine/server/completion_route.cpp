#include "engine/server/completion_route.h"

#include <fmt/format.h>
#include <httplib.h>

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

// How long a writer waits for an output before it probes the client.
constexpr auto poll_interval = std::chrono::milliseconds(200);

// One HTTP response's view of its engine requests (one per prompt and choice).
struct ResponseState {
  ResponseState(ResponseContext context, std::vector<std::string> ids, int64_t prompt_tokens,
                const CompletionRequest& request)
      : request_ids(std::move(ids)),
        assembler(std::move(context), request_ids, prompt_tokens),
        outputs(std::make_shared<OutputStream>()) {
    if (request.stream) stream.emplace(request_ids.size(), request.include_usage);
  }
  std::vector<std::string> request_ids;
  CompletionAssembler assembler;
  std::optional<CompletionStream> stream;  // none: the whole response at the end
  std::shared_ptr<OutputStream> outputs;
};

bool write(httplib::DataSink& sink, std::string_view text) {
  return sink.write(text.data(), text.size());
}

// Writes what one output adds; false when the client can no longer be written to.
bool write_next(ResponseState& state, httplib::DataSink& sink) {
  std::optional<RequestOutput> output = state.outputs->pop(poll_interval);
  if (!output) return write(sink, state.stream ? CompletionStream::keep_alive : " ");
  const size_t index = state.assembler.record(*output);
  if (state.stream && !write(sink, state.stream->event(*output, index, state.assembler)))
    return false;
  if (!state.assembler.finished()) return true;
  if (!write(sink, state.stream ? state.stream->closing_events(state.assembler)
                                : state.assembler.final_body()))
    return false;
  sink.done();
  return true;
}

}  // namespace

CompletionRoute::CompletionRoute(AsyncEngine& engine, CompletionParser parser,
                                 std::string served_model_name, int64_t server_created,
                                 std::atomic<int64_t>& responses_in_flight)
    : engine_(engine),
      parser_(std::move(parser)),
      served_model_name_(std::move(served_model_name)),
      server_created_(server_created),
      responses_in_flight_(responses_in_flight) {}

ResponseContext CompletionRoute::response_context(const CompletionRequest& request) {
  ResponseContext context;
  context.chat = request.chat;
  context.id = fmt::format("{}{:016x}", request.chat ? "chatcmpl-" : "cmpl-",
                           (static_cast<uint64_t>(server_created_) << 24) ^ next_id_++);
  context.created = unix_seconds_now();
  context.model = served_model_name_;
  context.logprobs = request.params.logprobs;
  context.tokenizer = &parser_.tokenizer();
  return context;
}

void CompletionRoute::handle(const httplib::Request& http_request, httplib::Response& response,
                             bool chat) {
  std::vector<std::string> added;  // engine requests to abort when the request fails
  std::optional<ApiError> failure;
  try {
    const CompletionRequest request = parser_.parse(http_request.body, chat);
    ResponseContext context = response_context(request);
    const std::vector<ChoiceRequest> choices =
        fan_out_choices(request, context.id, parser_.limits().max_model_len);
    int64_t prompt_tokens = 0;
    for (const std::vector<int32_t>& prompt : request.prompts)
      prompt_tokens += static_cast<int64_t>(prompt.size());
    std::vector<std::string> ids;
    for (const ChoiceRequest& choice : choices) ids.push_back(choice.id);
    auto state =
        std::make_shared<ResponseState>(std::move(context), std::move(ids), prompt_tokens, request);
    for (const ChoiceRequest& choice : choices) {
      engine_.add_request(choice.id, request.prompts[choice.prompt_index], choice.params,
                          state->outputs);
      added.push_back(choice.id);
    }
    auto provider = [state](size_t, httplib::DataSink& sink) { return write_next(*state, sink); };
    auto release = [this, state](bool) {
      --responses_in_flight_;
      if (state->assembler.finished()) return;
      // The client went away (or the write failed): its requests stop and free their blocks.
      for (const std::string& id : state->request_ids) engine_.abort(id);
    };
    ++responses_in_flight_;
    response.set_chunked_content_provider(request.stream ? "text/event-stream" : "application/json",
                                          provider, release);
    if (request.stream) response.set_header("Cache-Control", "no-cache");
    return;
  } catch (const ApiError& error) {
    failure = error;
  } catch (const EngineOverloaded& error) {
    response.set_header("Retry-After", "1");
    failure = ApiError(503, error.what(), "", "server_overloaded");
  } catch (const Error& error) {
    failure = invalid_request_error(error.what());
  }
  for (const std::string& id : added) engine_.abort(id);
  send_error(response, *failure);
}

}  // namespace tessera
