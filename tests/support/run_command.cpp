#include "support/run_command.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/test_tensors.h"

namespace tessera::testing {

CommandResult run_command(const std::string& command_line) {
  static std::atomic<int> counter{0};
  const std::string directory = fresh_temp_dir(fmt::format("command{}", counter++));
  std::filesystem::create_directories(directory);
  const std::string err_path = directory + "/stderr.txt";
  const std::string command = fmt::format("{} 2>'{}'", command_line, err_path);
  CommandResult result;
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t count;
  while ((count = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, count);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::stringstream err;
  err << std::ifstream(err_path).rdbuf();
  result.err = err.str();
  std::filesystem::remove_all(directory);
  return result;
}

}  // namespace tessera::testing
