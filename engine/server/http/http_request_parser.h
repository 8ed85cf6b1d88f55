// A strict, incremental HTTP/1.1 request parser (RFC 9112) for the server's front end: bytes go in
// as they arrive, whole requests come out, one at a time (bytes after one request stay for the
// next: pipelining). Anything ambiguous is refused rather than guessed, since a proxy in front
// may read it another way (request smuggling): conflicting or malformed Content-Length,
// Content-Length with Transfer-Encoding, codings other than chunked (501) or identity content
// (415), obsolete line folding, bare CR or LF, NUL and other control bytes. Oversized heads are
// 431, bodies over the limit 413 as soon as their length is known.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {

struct HttpLimits {
  size_t max_head_bytes = 16 << 10;  // request line and headers
  size_t max_headers = 64;
  size_t max_body_bytes = 8 << 20;
};

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path and query
  std::string path;    // the target up to '?'
  int minor_version = 1;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased, in order
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 without "Connection: close"

  // The value of the header `lowercase_name` (its first occurrence), or nullptr.
  const std::string* header(std::string_view lowercase_name) const;
  size_t header_count(std::string_view lowercase_name) const;
};

// A request the parser refuses: the status to answer, and why (the connection then closes).
struct HttpError {
  int status = 400;
  std::string message;
};

class HttpRequestParser {
 public:
  enum class State { need_more, complete, failed };

  explicit HttpRequestParser(HttpLimits limits) : limits_(limits) {}

  // Appends bytes the client sent and parses as far as they allow.
  State feed(std::string_view bytes);
  State state() const { return state_; }
  // Whether the head of the current request has arrived (its deadline then is the body's).
  bool head_complete() const { return head_done_; }
  // The head asked for "Expect: 100-continue" and the body has not started: the caller sends
  // "100 Continue" once (take_continue_request turns it off).
  bool take_continue_request();
  // Bytes of the current request received so far (0: none, the connection is idle).
  bool started() const { return !buffer_.empty() || head_done_; }

  // The complete request; the parser moves on to the next one in what was already fed.
  HttpRequest take_request();
  const HttpError& error() const { return error_; }

 private:
  State parse();
  bool parse_head(std::string_view head);
  bool parse_chunked();
  State fail(int status, std::string message);

  HttpLimits limits_;
  State state_ = State::need_more;
  std::string buffer_;  // received and not yet consumed
  size_t scanned_ = 0;  // of buffer_, searched for the end of the head without finding it
  bool head_done_ = false;
  bool expect_continue_ = false;
  HttpRequest request_;
  // Body framing of the current request.
  bool chunked_ = false;
  uint64_t content_length_ = 0;
  enum class ChunkState { size, data, data_end, trailer } chunk_state_ = ChunkState::size;
  uint64_t chunk_left_ = 0;
  HttpError error_;
};

}  // namespace tessera
