// Errors as the server writes them: an ApiError as an OpenAI error body, and the ApiError that a
// tessera::Error from validating a request becomes (a 400 naming the request field).
#pragma once

#include <string>

#include "engine/server/http/http_response_writer.h"
#include "engine/server/openai_protocol.h"

namespace tessera {

void send_error(HttpResponseWriter& writer, const ApiError& error, const HttpHeaders& headers = {});

// A tessera::Error's message starts with the field it is about ("max_tokens: ...",
// "temperature must be ..."): that word becomes the 400's param when it is a request field.
ApiError invalid_request_error(const std::string& message);

}  // namespace tessera
