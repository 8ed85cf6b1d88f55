#include "engine/server/api_key_check.h"

#include <cctype>

namespace tessera {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Every byte of the longer one is visited, whatever the contents.
  const size_t length = a.size() > b.size() ? a.size() : b.size();
  unsigned difference = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < length; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference |= static_cast<unsigned>(x ^ y);
  }
  return difference == 0;
}

std::optional<ApiError> check_api_key(const HttpRequest& request, std::string_view key) {
  if (request.header_count("authorization") > 1)
    return ApiError(400, "two Authorization headers: send one, 'Authorization: Bearer KEY'",
                    "Authorization", "invalid_request_error", "invalid_api_key");
  const ApiError refused(401, "Incorrect or missing API key: send 'Authorization: Bearer KEY'", "",
                         "invalid_request_error", "invalid_api_key");
  const std::string* value = request.header("authorization");
  if (value == nullptr) return refused;
  std::string_view credentials(*value);
  constexpr std::string_view scheme = "bearer";
  bool bearer = credentials.size() > scheme.size() && credentials[scheme.size()] == ' ';
  for (size_t i = 0; bearer && i < scheme.size(); ++i)
    bearer = std::tolower(static_cast<unsigned char>(credentials[i])) == scheme[i];
  if (!bearer) return refused;
  credentials.remove_prefix(scheme.size());
  while (!credentials.empty() && credentials.front() == ' ') credentials.remove_prefix(1);
  if (!constant_time_equal(credentials, key)) return refused;
  return std::nullopt;
}

}  // namespace tessera
