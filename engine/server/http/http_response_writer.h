// One response as its handler writes it (on a worker thread, or on the event loop for the quick
// routes) and the event loop sends it: a whole body with Content-Length, or a chunked body piece
// by piece. The handler never touches the socket: bytes wait here until the loop writes them,
// and a handler that gets ahead of a slow reader waits once max_unsent bytes are queued, so a
// response holds bounded memory. When the client goes away (or stops reading past the write
// deadline) writes return false and client_gone() turns true, so the handler can stop its work.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// "OK", "Not Found", ... for a status code.
std::string_view http_reason(int status);

class HttpResponseWriter {
 public:
  // `wake` tells the event loop that bytes are waiting or the response ended. `keep_alive`:
  // whether the connection stays open after this response. `head_only`: a HEAD request (the
  // body is counted, not sent).
  HttpResponseWriter(std::function<void()> wake, bool keep_alive, bool head_only,
                     size_t max_unsent);

  // The whole response. Returns false when the client is gone.
  bool send(int status, std::string_view content_type, std::string_view body,
            const HttpHeaders& headers = {});
  // A chunked response: the head, then each piece, then the end.
  bool begin_chunked(int status, std::string_view content_type, const HttpHeaders& headers = {});
  bool write_chunk(std::string_view data);
  bool end_chunked();

  bool started() const;
  int status() const;  // 0 before the response started
  bool ended() const;  // the whole response is written here (not necessarily sent yet)
  bool client_gone() const;
  bool keep_alive() const { return keep_alive_; }
  size_t bytes_written() const;  // of the response, head included

  // The event loop's side. take_unsent moves the queued bytes out (and wakes a waiting handler);
  // finished: the handler wrote the whole response.
  std::string take_unsent();
  bool finished() const;
  void mark_client_gone();
  // The handler's side: the response cannot be finished (the connection is closed).
  void abandon();
  // Forces Connection: close on a response that has not started (the server is stopping).
  void close_after();

 private:
  bool append(std::string_view bytes, bool finish);  // waits while too much is unsent
  std::string head(int status, std::string_view content_type, const HttpHeaders& headers,
                   std::string_view framing) const;

  std::function<void()> wake_;
  bool keep_alive_;
  const bool head_only_;
  const size_t max_unsent_;
  mutable std::mutex mutex_;
  std::condition_variable drained_;
  std::string unsent_;
  size_t written_ = 0;
  bool started_ = false;
  int status_ = 0;
  bool finished_ = false;
  bool gone_ = false;
};

}  // namespace tessera
