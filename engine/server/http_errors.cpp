#include "engine/server/http_errors.h"

namespace tessera {
namespace {

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
                                 "messages",
                                 "priority"};
  for (const char* field : fields) {
    std::string name(field);
    if (message.size() > name.size() && message.compare(0, name.size(), name) == 0 &&
        (message[name.size()] == ':' || message[name.size()] == ' '))
      return name;
  }
  return "";
}

}  // namespace

void send_error(HttpResponseWriter& writer, const ApiError& error, const HttpHeaders& headers) {
  writer.send(error.status, "application/json", dump_json(error.body()), headers);
}

ApiError invalid_request_error(const std::string& message) {
  return ApiError(400, message, param_of(message));
}

}  // namespace tessera
