// Errors as the server writes them: an ApiError into a cpp-httplib response, and the ApiError
// that a tessera::Error from validating a request becomes (a 400 naming the request field).
#pragma once

#include <string>

#include "engine/server/openai_protocol.h"

namespace httplib {
struct Response;
}

namespace tessera {

void send_error(httplib::Response& response, const ApiError& error);

// A tessera::Error's message starts with the field it is about ("max_tokens: ...",
// "temperature must be ..."): that word becomes the 400's param when it is a request field.
ApiError invalid_request_error(const std::string& message);

}  // namespace tessera
