#include "engine/server/http/http_response_writer.h"

#include <fmt/format.h>

#include "runtime/check.h"

namespace tessera {

std::string_view http_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

HttpResponseWriter::HttpResponseWriter(std::function<void()> wake, bool keep_alive, bool head_only,
                                       size_t max_unsent)
    : wake_(std::move(wake)),
      keep_alive_(keep_alive),
      head_only_(head_only),
      max_unsent_(max_unsent) {}

std::string HttpResponseWriter::head(int status, std::string_view content_type,
                                     const HttpHeaders& headers, std::string_view framing) const {
  std::string text = fmt::format("HTTP/1.1 {} {}\r\n", status, http_reason(status));
  if (!content_type.empty()) text += fmt::format("Content-Type: {}\r\n", content_type);
  for (const auto& [name, value] : headers) text += fmt::format("{}: {}\r\n", name, value);
  text += framing;
  text += keep_alive_ ? "" : "Connection: close\r\n";
  return text + "\r\n";
}

bool HttpResponseWriter::send(int status, std::string_view content_type, std::string_view body,
                              const HttpHeaders& headers) {
  {
    std::lock_guard lock(mutex_);
    TESSERA_CHECK(!started_, "a response is sent once");
    started_ = true;
    status_ = status;
  }
  const std::string text =
      head(status, content_type, headers, fmt::format("Content-Length: {}\r\n", body.size()));
  if (head_only_) return append(text, true);
  // The head and a small body leave together; a large body is queued piece by piece.
  if (body.size() <= max_unsent_) return append(text + std::string(body), true);
  if (!append(text, false)) return false;
  for (size_t at = 0; at < body.size(); at += max_unsent_)
    if (!append(body.substr(at, max_unsent_), at + max_unsent_ >= body.size())) return false;
  return true;
}

bool HttpResponseWriter::begin_chunked(int status, std::string_view content_type,
                                       const HttpHeaders& headers) {
  {
    std::lock_guard lock(mutex_);
    TESSERA_CHECK(!started_, "a response is sent once");
    started_ = true;
    status_ = status;
  }
  return append(head(status, content_type, headers, "Transfer-Encoding: chunked\r\n"), false);
}

bool HttpResponseWriter::write_chunk(std::string_view data) {
  if (data.empty() || head_only_) return !client_gone();
  return append(fmt::format("{:x}\r\n{}\r\n", data.size(), data), false);
}

bool HttpResponseWriter::end_chunked() {
  return append(head_only_ ? "" : "0\r\n\r\n", true);
}

bool HttpResponseWriter::append(std::string_view bytes, bool finish) {
  {
    std::unique_lock lock(mutex_);
    drained_.wait(lock, [&] { return gone_ || unsent_.size() < max_unsent_; });
    if (gone_) return false;
    unsent_.append(bytes);
    written_ += bytes.size();
    finished_ = finish;
  }
  wake_();
  return true;
}

bool HttpResponseWriter::started() const {
  std::lock_guard lock(mutex_);
  return started_;
}

int HttpResponseWriter::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

bool HttpResponseWriter::ended() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

size_t HttpResponseWriter::bytes_written() const {
  std::lock_guard lock(mutex_);
  return written_;
}

bool HttpResponseWriter::client_gone() const {
  std::lock_guard lock(mutex_);
  return gone_;
}

std::string HttpResponseWriter::take_unsent() {
  std::string bytes;
  {
    std::lock_guard lock(mutex_);
    bytes.swap(unsent_);
  }
  drained_.notify_all();
  return bytes;
}

bool HttpResponseWriter::finished() const {
  std::lock_guard lock(mutex_);
  return finished_ && unsent_.empty();
}

void HttpResponseWriter::mark_client_gone() {
  {
    std::lock_guard lock(mutex_);
    gone_ = true;
    unsent_.clear();
  }
  drained_.notify_all();
}

void HttpResponseWriter::abandon() {
  mark_client_gone();
  wake_();
}

void HttpResponseWriter::close_after() {
  std::lock_guard lock(mutex_);
  if (!started_) keep_alive_ = false;
}

}  // namespace tessera
