#include "engine/server/http/http_front_end.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/check.h"
#include "runtime/cpu/host_memory.h"

namespace tessera {
namespace {

constexpr uint64_t listener_id = 0;
constexpr uint64_t wake_id = 1;
constexpr auto sweep_interval = std::chrono::milliseconds(50);
constexpr auto linger_time = std::chrono::seconds(1);  // reading what a closed client still sends
constexpr auto drain_write_extra = std::chrono::seconds(1);  // responses aborted at the deadline
constexpr size_t read_chunk = 64 << 10;
constexpr size_t max_read_per_event = 1 << 20;    // so one fast client cannot hold the loop
constexpr size_t large_exchange_bytes = 1 << 20;  // request body + response: a memory peak

}  // namespace

struct HttpFrontEnd::Connection {
  Connection(uint64_t id, int fd, const HttpLimits& limits) : id(id), fd(fd), parser(limits) {}
  enum class Phase { reading, handling, lingering };
  uint64_t id;
  int fd;
  HttpRequestParser parser;
  Phase phase = Phase::reading;
  std::shared_ptr<HttpResponseWriter> writer;  // while handling
  std::string out;  // bytes being written: the writer's, or "100 Continue"
  size_t out_sent = 0;
  Clock::time_point waiting_since;  // reading: when this request's wait began
  Clock::time_point deadline;       // reading: head, body or idle; lingering: the close
  Clock::time_point last_progress;  // handling: the last time bytes left
  bool head_seen = false;
  uint32_t interest = 0;
};

size_t raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  return static_cast<size_t>(std::min<rlim_t>(limit.rlim_cur, 1 << 24));
}

HttpFrontEnd::HttpFrontEnd(HttpFrontEndOptions options, HttpRouteFn route, HttpErrorFn send_error)
    : options_(std::move(options)),
      route_(std::move(route)),
      send_error_(std::move(send_error)),
      pool_(options_.handler_threads) {}

HttpFrontEnd::~HttpFrontEnd() {
  for (auto& [id, connection] : connections_) {
    if (connection->writer) connection->writer->mark_client_gone();
    ::close(connection->fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

int HttpFrontEnd::bind() {
  const size_t open_files = raise_open_file_limit();
  // Room for the model's files, the engine and the log next to the connections.
  const size_t connection_room = open_files > 128 ? open_files - 64 : open_files / 2;
  if (options_.max_connections > connection_room) {
    spdlog::info("open files limited to {}: at most {} connections", open_files, connection_room);
    options_.max_connections = connection_room;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* addresses = nullptr;
  const std::string port = std::to_string(options_.port);
  const int resolved = ::getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &addresses);
  for (addrinfo* at = resolved == 0 ? addresses : nullptr; at != nullptr && listen_fd_ < 0;
       at = at->ai_next) {
    const int fd = ::socket(at->ai_family, at->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, at->ai_addr, at->ai_addrlen) == 0 && ::listen(fd, 4096) == 0)
      listen_fd_ = fd;
    else
      ::close(fd);
  }
  if (addresses != nullptr) ::freeaddrinfo(addresses);
  TESSERA_REQUIRE(listen_fd_ >= 0,
                  "cannot listen on http://{}:{}: the address is in use or not available here; "
                  "give another --port or --host",
                  options_.host, options_.port);
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  TESSERA_REQUIRE(epoll_fd_ >= 0 && wake_fd_ >= 0, "cannot create the server's event loop: {}",
                  std::strerror(errno));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = listener_id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &event);
  listening_ = true;
  event.data.u64 = wake_id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
  return bound_port;
}

void HttpFrontEnd::wake(uint64_t id) {
  bool first = false;
  {
    std::lock_guard lock(wake_mutex_);
    first = woken_.empty();
    woken_.push_back(id);
  }
  if (first) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = ::write(wake_fd_, &one, sizeof(one));
  }
}

void HttpFrontEnd::drain(Clock::time_point deadline) {
  {
    std::lock_guard lock(wake_mutex_);
    drain_requested_ = true;
    drain_deadline_ = deadline;
  }
  wake(wake_id);
}

void HttpFrontEnd::run() {
  TESSERA_CHECK(epoll_fd_ >= 0, "bind() before run()");
  std::vector<epoll_event> events(512);
  Clock::time_point last_sweep = Clock::now();
  while (!(draining_ && connections_.empty())) {
    const int count = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                                   static_cast<int>(sweep_interval.count()));
    for (int i = 0; i < count; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == listener_id) {
        accept_all();
      } else if (id == wake_id) {
        uint64_t value = 0;
        [[maybe_unused]] ssize_t got = ::read(wake_fd_, &value, sizeof(value));
      } else if (auto found = connections_.find(id); found != connections_.end()) {
        on_event(*found->second, events[i].events);
      }
    }
    std::vector<uint64_t> woken;
    {
      std::lock_guard lock(wake_mutex_);
      woken.swap(woken_);
      if (drain_requested_ && !draining_) start_draining();
    }
    for (uint64_t id : woken)
      if (auto found = connections_.find(id); found != connections_.end()) flush(*found->second);
    if (Clock::now() - last_sweep >= sweep_interval) {
      sweep();
      last_sweep = Clock::now();
    }
  }
}

void HttpFrontEnd::start_draining() {
  draining_ = true;
  if (listen_fd_ >= 0) {
    if (listening_) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
    ::close(listen_fd_);
    listen_fd_ = -1;
    listening_ = false;
  }
  std::vector<Connection*> idle;
  for (auto& [id, connection] : connections_) {
    if (connection->phase == Connection::Phase::reading && !connection->parser.started())
      idle.push_back(connection.get());
    if (connection->writer) connection->writer->close_after();
  }
  for (Connection* connection : idle) close(*connection);
}

void HttpFrontEnd::accept_all() {
  while (listening_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      // Out of files: make room, or leave the rest in the backlog until the next sweep.
      if ((errno == EMFILE || errno == ENFILE) && make_room()) continue;
      if (errno == EMFILE || errno == ENFILE) {
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        listening_ = false;  // until the next sweep
      }
      return;
    }
    if (connections_.size() >= options_.max_connections && !make_room()) {
      ::close(fd);
      continue;
    }
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    const uint64_t id = next_id_++;
    auto connection = std::make_unique<Connection>(id, fd, options_.limits);
    connection->waiting_since = Clock::now();
    connection->deadline = connection->waiting_since + options_.head_timeout;
    Connection& added = *connection;
    connections_.emplace(id, std::move(connection));
    watch(added);
  }
}

bool HttpFrontEnd::make_room() {
  Connection* oldest = nullptr;
  for (auto& [id, connection] : connections_)
    if (connection->phase != Connection::Phase::handling &&
        (oldest == nullptr || connection->waiting_since < oldest->waiting_since))
      oldest = connection.get();
  if (oldest == nullptr) return false;
  close(*oldest);
  return true;
}

void HttpFrontEnd::on_event(Connection& connection, uint32_t events) {
  if (connection.phase == Connection::Phase::lingering) {
    char discard[4096];
    ssize_t got = 0;
    while ((got = ::recv(connection.fd, discard, sizeof(discard), 0)) > 0) {
    }
    if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) close(connection);
    return;
  }
  if ((events & (EPOLLERR | EPOLLHUP)) ||
      (connection.phase == Connection::Phase::handling && (events & EPOLLRDHUP))) {
    close(connection);  // the client went away: its writer tells the handler
    return;
  }
  if (events & EPOLLOUT) {
    flush(connection);
    if (!connections_.contains(connection.id)) return;
  }
  if ((events & EPOLLIN) && connection.phase == Connection::Phase::reading) read(connection);
}

void HttpFrontEnd::read(Connection& connection) {
  char buffer[read_chunk];
  size_t total = 0;
  while (total < max_read_per_event) {
    const ssize_t got = ::recv(connection.fd, buffer, sizeof(buffer), 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      close(connection);  // closed (or reset) before a whole request arrived
      return;
    }
    if (got < 0) {
      if (errno == EINTR) continue;
      break;
    }
    total += static_cast<size_t>(got);
    if (!connection.parser.started()) {  // the first byte of a request starts its head deadline
      connection.waiting_since = Clock::now();
      connection.deadline = connection.waiting_since + options_.head_timeout;
    }
    const HttpRequestParser::State state =
        connection.parser.feed(std::string_view(buffer, static_cast<size_t>(got)));
    if (state != HttpRequestParser::State::need_more) break;
    if (connection.parser.head_complete() && !connection.head_seen) {
      connection.head_seen = true;
      connection.deadline = Clock::now() + options_.body_timeout;
      if (connection.parser.take_continue_request()) {
        connection.out += "HTTP/1.1 100 Continue\r\n\r\n";
        flush(connection);
        if (!connections_.contains(connection.id)) return;
      }
    }
  }
  advance(connection);
}

void HttpFrontEnd::advance(Connection& connection) {
  if (connection.phase != Connection::Phase::reading) return;
  switch (connection.parser.state()) {
    case HttpRequestParser::State::complete:
      dispatch(connection);
      break;
    case HttpRequestParser::State::failed:
      respond_error(connection, connection.parser.error());
      break;
    case HttpRequestParser::State::need_more:
      watch(connection);
      break;
  }
}

void HttpFrontEnd::dispatch(Connection& connection) {
  auto request = std::make_shared<HttpRequest>(connection.parser.take_request());
  const uint64_t id = connection.id;
  connection.writer = std::make_shared<HttpResponseWriter>(
      [this, id] { wake(id); }, request->keep_alive && !draining_, request->method == "HEAD",
      options_.max_unsent_bytes);
  connection.phase = Connection::Phase::handling;
  connection.head_seen = false;
  connection.last_progress = Clock::now();
  HttpDispatch dispatch = route_(*request);
  auto run = [handler = std::move(dispatch.handler), request,
              writer = connection.writer]() mutable {
    try {
      handler(*request, *writer);
    } catch (const std::exception& error) {
      spdlog::error("{} {}: {}", request->method, request->path, error.what());
      if (!writer->started()) writer->send(500, "text/plain", "internal server error\n");
    }
    // A response its handler left unfinished cannot be completed: the connection closes.
    if (!writer->ended() && !writer->client_gone()) writer->abandon();
    // A large exchange leaves a peak of freed memory (the body, the tokens, the response): it
    // goes back to the system once the request is gone.
    const bool large = request->body.size() + writer->bytes_written() >= large_exchange_bytes;
    request.reset();
    if (large) release_free_memory();
  };
  if (dispatch.on_pool) {
    pool_.submit(std::move(run));
    watch(connection);
  } else {
    run();
    flush(connection);
  }
}

void HttpFrontEnd::respond_error(Connection& connection, const HttpError& error) {
  const uint64_t id = connection.id;
  connection.writer =
      std::make_shared<HttpResponseWriter>([this, id] { wake(id); }, /*keep_alive=*/false,
                                           /*head_only=*/false, options_.max_unsent_bytes);
  connection.phase = Connection::Phase::handling;
  connection.last_progress = Clock::now();
  send_error_(*connection.writer, error);
  flush(connection);
}

void HttpFrontEnd::flush(Connection& connection) {
  if (connection.phase == Connection::Phase::lingering) return;
  while (true) {
    if (connection.out_sent == connection.out.size()) {
      connection.out.clear();
      connection.out_sent = 0;
      if (connection.writer) connection.out = connection.writer->take_unsent();
      if (connection.out.empty()) break;
    }
    const ssize_t sent = ::send(connection.fd, connection.out.data() + connection.out_sent,
                                connection.out.size() - connection.out_sent, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      close(connection);
      return;
    }
    connection.out_sent += static_cast<size_t>(sent);
    connection.last_progress = Clock::now();
  }
  if (connection.writer && connection.writer->client_gone()) return close(connection);
  if (connection.out.empty() && connection.writer && connection.writer->finished()) {
    if (options_.on_response) options_.on_response(connection.writer->status());
    const bool keep_alive = connection.writer->keep_alive() && !draining_;
    connection.writer.reset();
    if (!keep_alive) return linger(connection);
    connection.phase = Connection::Phase::reading;
    connection.waiting_since = Clock::now();
    connection.deadline =
        connection.waiting_since +
        (connection.parser.started() ? options_.head_timeout : options_.keep_alive_timeout);
    if (connection.parser.head_complete()) connection.head_seen = true;
    return advance(connection);  // a pipelined request may be waiting already
  }
  watch(connection);
}

void HttpFrontEnd::linger(Connection& connection) {
  // Closing with unread bytes would reset the connection and could destroy the response on its
  // way; so the write side closes first and what still comes is read and dropped for a moment.
  ::shutdown(connection.fd, SHUT_WR);
  connection.phase = Connection::Phase::lingering;
  connection.deadline = Clock::now() + linger_time;
  watch(connection);
}

void HttpFrontEnd::close(Connection& connection) {
  if (connection.writer) connection.writer->mark_client_gone();
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connection.fd, nullptr);
  ::close(connection.fd);
  connections_.erase(connection.id);  // destroys `connection`
}

void HttpFrontEnd::watch(Connection& connection) {
  uint32_t interest = 0;
  switch (connection.phase) {
    case Connection::Phase::reading:
      interest = EPOLLIN | EPOLLRDHUP | (connection.out.empty() ? 0u : EPOLLOUT);
      break;
    case Connection::Phase::handling:
      // Further (pipelined) bytes wait in the socket; a close is still seen.
      interest = EPOLLRDHUP | (connection.out.empty() ? 0u : EPOLLOUT);
      break;
    case Connection::Phase::lingering:
      interest = EPOLLIN | EPOLLRDHUP;
      break;
  }
  if (interest == connection.interest) return;
  epoll_event event{};
  event.events = interest;
  event.data.u64 = connection.id;
  ::epoll_ctl(epoll_fd_, connection.interest == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, connection.fd,
              &event);
  connection.interest = interest;
}

void HttpFrontEnd::sweep() {
  const Clock::time_point now = Clock::now();
  if (!listening_ && !draining_ && listen_fd_ >= 0) {  // accept() ran out of files: try again
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = listener_id;
    listening_ = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &event) == 0;
  }
  std::vector<uint64_t> expired;
  std::vector<uint64_t> timed_out;
  for (auto& [id, connection] : connections_) {
    switch (connection->phase) {
      case Connection::Phase::reading:
        if (now >= connection->deadline || (draining_ && now >= drain_deadline_))
          (connection->parser.started() ? timed_out : expired).push_back(id);
        break;
      case Connection::Phase::handling:
        if ((!connection->out.empty() &&
             now - connection->last_progress > options_.write_timeout) ||
            (draining_ && now >= drain_deadline_ + drain_write_extra))
          expired.push_back(id);
        break;
      case Connection::Phase::lingering:
        if (now >= connection->deadline) expired.push_back(id);
        break;
    }
  }
  for (uint64_t id : expired)
    if (auto found = connections_.find(id); found != connections_.end()) close(*found->second);
  for (uint64_t id : timed_out)
    if (auto found = connections_.find(id); found != connections_.end())
      respond_error(*found->second,
                    {408,
                     "the request did not arrive in time: send its head within the head "
                     "timeout and its body within the body timeout"});
}

}  // namespace tessera
