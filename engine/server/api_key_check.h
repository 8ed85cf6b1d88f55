// The API key of the /v1 routes: exactly one `Authorization: Bearer KEY` header, the scheme in any
// case (RFC 9110 11.1), the whole credential compared with the key in time that does not depend on
// where they differ. /health, /version and /metrics stay open (README, Serving: what they expose).
#pragma once

#include <optional>
#include <string_view>

#include "engine/server/http/http_request_parser.h"
#include "engine/server/openai_protocol.h"

namespace tessera {

// Nothing when the request may pass; otherwise the error to answer (401, which carries
// `WWW-Authenticate: Bearer`, or 400 for two Authorization headers).
std::optional<ApiError> check_api_key(const HttpRequest& request, std::string_view key);

// Equal length and bytes, in time that depends on the lengths alone.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace tessera
