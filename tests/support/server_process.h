// A real `tessera serve` process for integration tests: started on a free loopback port
// (--port 0; the port is read from its "listening on" line), stopped with SIGTERM. Also a shell
// helper that runs a command and returns its output and exit status.
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

namespace tessera::testing {

class ServerProcess {
 public:
  // `binary` serve `arguments` --port 0; waits (up to timeout_seconds) for "listening on".
  // Throws std::runtime_error with the server's stderr when it does not come up.
  ServerProcess(const std::string& binary, const std::vector<std::string>& arguments,
                int timeout_seconds = 120);
  ~ServerProcess();  // SIGKILL if still running

  const std::string& url() const { return url_; }  // http://127.0.0.1:PORT
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends SIGTERM and waits; returns the exit status (-1 when it had to be killed).
  int terminate(int timeout_seconds = 60);
  std::string stderr_text() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string url_;
  std::string stderr_path_;
};

struct CommandResult {
  int status = -1;     // the exit status
  std::string output;  // stdout
  // stderr, when run_shell kept it; initialized, so that {status, output} stays warning-free
  std::string error_output{};
};
// Runs `command` with /bin/sh. Its stderr goes where the test's goes, or with keep_stderr into
// error_output (for tests of what a command logs).
CommandResult run_shell(const std::string& command, bool keep_stderr = false);
// Single-quotes `text` for the shell.
std::string shell_quote(const std::string& text);

}  // namespace tessera::testing
