// Fuzz target: the HTTP/1.1 request parser of the server's front end (HttpRequestParser), fed the
// bytes as a socket would deliver them: the first input byte sets the size of the pieces (1 to
// 256 bytes), the rest is the stream, pipelined requests included. Every outcome must be a
// request within the limits (a method, a path starting with '/', a body no larger than allowed)
// or a refusal with a 4xx/5xx status and a message; nothing may crash or grow without bound.
#include <string_view>

#include "engine/server/http/http_request_parser.h"
#include "fuzz/fuzz_support.h"

using namespace tessera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t piece = static_cast<size_t>(data[0]) + 1;
  std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  HttpLimits limits;
  limits.max_head_bytes = 2048;
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;
  HttpRequestParser parser(limits);
  size_t requests = 0;
  while (true) {
    HttpRequestParser::State state = parser.state();
    while (state == HttpRequestParser::State::need_more && !stream.empty()) {
      const std::string_view bytes = stream.substr(0, piece);
      stream.remove_prefix(bytes.size());
      state = parser.feed(bytes);
      parser.take_continue_request();
    }
    if (state == HttpRequestParser::State::failed) {
      const HttpError& error = parser.error();
      fuzz::require(error.status >= 400 && error.status < 600, "a refusal without a 4xx/5xx");
      fuzz::require(!error.message.empty(), "a refusal without a message");
      return 0;
    }
    if (state != HttpRequestParser::State::complete) return 0;
    const HttpRequest request = parser.take_request();
    fuzz::require(!request.method.empty(), "a request without a method");
    fuzz::require(!request.path.empty() && request.path[0] == '/', "a path not starting with /");
    fuzz::require(request.body.size() <= limits.max_body_bytes, "a body over the limit");
    fuzz::require(request.headers.size() <= limits.max_headers, "more headers than the limit");
    fuzz::require(request.minor_version == 0 || request.minor_version == 1, "an HTTP version");
    fuzz::require(++requests <= size, "more requests than bytes");
  }
}
