#include "support/background_process.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/test_tensors.h"

namespace tessera::testing {

BackgroundProcess::BackgroundProcess(const std::string& command_line) {
  static std::atomic<int> counter{0};
  const std::string directory = fresh_temp_dir(fmt::format("background{}", counter++));
  std::filesystem::create_directories(directory);
  stderr_path_ = directory + "/stderr.txt";
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  const std::string command = fmt::format("exec {} 2>'{}'", command_line, stderr_path_);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  stdout_fd_ = pipe_fds[0];
}

BackgroundProcess::~BackgroundProcess() {
  stop();
  if (stdout_fd_ >= 0) close(stdout_fd_);
  std::error_code ignored;
  std::filesystem::remove_all(std::filesystem::path(stderr_path_).parent_path(), ignored);
}

std::optional<std::string> BackgroundProcess::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const size_t newline = pending_.find('\n');
    if (newline != std::string::npos) {
      std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd ready{stdout_fd_, POLLIN, 0};
    if (poll(&ready, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t count = read(stdout_fd_, buffer, sizeof buffer);
    if (count <= 0) return std::nullopt;  // the output ended
    pending_.append(buffer, static_cast<size_t>(count));
  }
}

int BackgroundProcess::stop(std::chrono::milliseconds grace) {
  if (status_) return *status_;
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return *status_;
}

std::string BackgroundProcess::stderr_text() const {
  std::stringstream text;
  text << std::ifstream(stderr_path_).rdbuf();
  return text.str();
}

}  // namespace tessera::testing
