// A child process that runs beside a test (a server): its stdout read line by line as it comes,
// its stderr kept in a file for failure messages. The destructor stops it (SIGTERM, then SIGKILL
// if it lingers), so no test leaves one behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

namespace tessera::testing {

class BackgroundProcess {
 public:
  // Runs `command_line` with /bin/sh, exec'ed so that the child is the command itself.
  explicit BackgroundProcess(const std::string& command_line);
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  // The next line of stdout (without its newline), waiting at most `timeout`; nullopt when the
  // time runs out or the output ends.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // SIGTERM, then waits up to `grace` before SIGKILL; the exit status (-1: killed by a signal).
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(20));
  std::string stderr_text() const;

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string pending_;
  std::string stderr_path_;
  std::optional<int> status_;
};

}  // namespace tessera::testing
