// The server's HTTP/1.1 front end: one event-loop thread (epoll) owns every connection, reads
// and parses requests (HttpRequestParser) without blocking, and hands each complete request to
// its handler: quick routes run on the loop, slow ones on the HandlerPool. A client that sends
// slowly or not at all costs a socket and a buffer, never a thread, and is dropped at its
// deadline (head, body, idle keep-alive, stalled write). Limits: connections (the oldest one
// still sending its request makes room for a new one), head size and header count, body size.
// Requests on one connection are answered in order (pipelining). A client that closes its side
// is gone: its response's writer says so, and the handler stops its work. drain() stops
// accepting, closes idle connections and ends the rest at a deadline.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/server/http/handler_pool.h"
#include "engine/server/http/http_request_parser.h"
#include "engine/server/http/http_response_writer.h"

namespace tessera {

struct HttpFrontEndOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  HttpLimits limits;
  size_t max_connections = 8192;                         // also capped by the open-file limit
  std::chrono::milliseconds head_timeout{10'000};        // from a request's first byte (or accept)
  std::chrono::milliseconds body_timeout{30'000};        // from the end of the head
  std::chrono::milliseconds keep_alive_timeout{15'000};  // idle between requests
  std::chrono::milliseconds write_timeout{30'000};  // a client that reads nothing for this long
  int handler_threads = 256;
  size_t max_unsent_bytes = 1 << 20;            // per response, before its handler waits
  std::function<void(int status)> on_response;  // each response's status, once it is sent
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponseWriter&)>;
// How a request is answered: by `handler`, on the pool when it may block.
struct HttpDispatch {
  HttpHandler handler;
  bool on_pool = false;
};
using HttpRouteFn = std::function<HttpDispatch(const HttpRequest&)>;
// Writes an error response the front end decides on (a malformed request, a timeout).
using HttpErrorFn = std::function<void(HttpResponseWriter&, const HttpError&)>;

class HttpFrontEnd {
 public:
  HttpFrontEnd(HttpFrontEndOptions options, HttpRouteFn route, HttpErrorFn send_error);
  ~HttpFrontEnd();

  // Listens on host:port; returns the port. Throws tessera::Error naming the address.
  int bind();
  void run();  // serves until drained
  // Any thread: no new connections; idle ones close now, requests still arriving at
  // `deadline`, responses still being written a second later; then run() returns.
  void drain(std::chrono::steady_clock::time_point deadline);

 private:
  struct Connection;
  using Clock = std::chrono::steady_clock;

  void accept_all();
  bool make_room();  // closes the oldest connection still sending a request
  void on_event(Connection& connection, uint32_t events);
  void read(Connection& connection);
  void advance(Connection& connection);
  void dispatch(Connection& connection);
  void respond_error(Connection& connection, const HttpError& error);
  void flush(Connection& connection);
  void linger(Connection& connection);
  void close(Connection& connection);
  void watch(Connection& connection);
  void sweep();
  void start_draining();
  void wake(uint64_t id);

  HttpFrontEndOptions options_;
  HttpRouteFn route_;
  HttpErrorFn send_error_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  bool listening_ = false;
  uint64_t next_id_ = 2;  // 0: the listening socket, 1: the wake-up event
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::mutex wake_mutex_;
  std::vector<uint64_t> woken_;  // connections whose handler wrote or finished
  bool drain_requested_ = false;
  Clock::time_point drain_deadline_;
  bool draining_ = false;
  HandlerPool pool_;  // last: its handlers finish before the rest goes
};

// Raises the soft limit on open files to the hard one (each connection is a file); returns it.
size_t raise_open_file_limit();

}  // namespace tessera
