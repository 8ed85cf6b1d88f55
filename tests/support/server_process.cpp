#include "support/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace tessera::testing {

ServerProcess::ServerProcess(const std::string& binary, const std::vector<std::string>& arguments,
                             int timeout_seconds) {
  char stderr_template[] = "/tmp/tessera-serve-XXXXXX";
  int stderr_fd = mkstemp(stderr_template);
  stderr_path_ = stderr_template;
  int out[2];
  if (stderr_fd < 0 || pipe(out) != 0) throw std::runtime_error("cannot make pipes for the server");
  std::vector<std::string> argv_strings = {binary, "serve"};
  argv_strings.insert(argv_strings.end(), arguments.begin(), arguments.end());
  argv_strings.push_back("--port");
  argv_strings.push_back("0");
  pid_ = fork();
  if (pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(stderr_fd, STDERR_FILENO);
    close(out[0]);
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  close(stderr_fd);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    char buffer[256];
    ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n > 0) seen.append(buffer, static_cast<size_t>(n));
    size_t at = seen.find("listening on http://");
    size_t end = at == std::string::npos ? std::string::npos : seen.find('\n', at);
    if (end != std::string::npos) {
      url_ = seen.substr(at + 13, end - at - 13);
      port_ = std::stoi(url_.substr(url_.rfind(':') + 1));
      close(out[0]);  // the server prints nothing else on stdout
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  close(out[0]);
  throw std::runtime_error("tessera serve did not start: " + stderr_text());
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::remove(stderr_path_.c_str());
}

int ServerProcess::terminate(int timeout_seconds) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string ServerProcess::stderr_text() const {
  std::ifstream in(stderr_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

CommandResult run_shell(const std::string& command, bool keep_stderr) {
  CommandResult result;
  std::string stderr_path;
  std::string full_command = command;
  if (keep_stderr) {
    char stderr_template[] = "/tmp/tessera-stderr-XXXXXX";
    const int stderr_fd = mkstemp(stderr_template);
    if (stderr_fd < 0) return result;
    close(stderr_fd);
    stderr_path = stderr_template;
    full_command = "{ " + command + "; } 2>" + shell_quote(stderr_path);
  }
  std::FILE* pipe = popen(full_command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (keep_stderr) {
    std::stringstream text;
    text << std::ifstream(stderr_path).rdbuf();
    result.error_output = text.str();
    std::remove(stderr_path.c_str());
  }
  return result;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace tessera::testing
