// Raw HTTP/1.1 over a loopback socket, for the server tests that must send what no polite client
// sends (stalled heads, conflicting framing, pipelined requests) and read exactly what comes back.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace tessera::testing {

struct RawResponse {
  int status = 0;       // 0: no (complete) response before the timeout or the close
  std::string head;     // status line and headers, as sent
  std::string body;     // de-chunked
  bool closed = false;  // the server closed the connection after it
};

class RawConnection {
 public:
  explicit RawConnection(int port);  // throws std::runtime_error when it cannot connect
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool send(std::string_view bytes);  // false when the server closed the connection
  // Reads one response (Content-Length or chunked framing).
  RawResponse read_response(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Waits until the server closes the connection; false when it is still open at the timeout.
  bool wait_closed(std::chrono::milliseconds timeout);
  void close();

 private:
  bool fill(std::chrono::steady_clock::time_point deadline);  // reads more; false: closed/timeout

  int fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

// Raises this process's soft limit on open files to the hard one.
void raise_open_file_limit_for_test();

}  // namespace tessera::testing
