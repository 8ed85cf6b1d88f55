// The tessera binary: logs go to stderr and stdout holds only the generated text.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/test_tensors.h"

using namespace tessera;
using namespace tessera::testing;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

struct RunResult {
  int status = -1;
  std::string out, err;
};

// Runs the tessera binary with `arguments` (shell words), capturing stdout and stderr apart.
RunResult run_tessera(const std::string& arguments) {
  std::string directory = fresh_temp_dir("cli");
  std::filesystem::create_directories(directory);
  std::string err_path = directory + "/stderr.txt";
  std::string command = fmt::format("'{}' {} 2>'{}'", TESSERA_BINARY, arguments, err_path);
  RunResult result;
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t count;
  while ((count = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, count);
  int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::stringstream err;
  err << std::ifstream(err_path).rdbuf();
  result.err = err.str();
  return result;
}

}  // namespace

TEST(Cli, GenerateWritesLogsToStderrAndOnlyTextToStdout) {
  RunResult result = run_tessera("generate -n 2");
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_THAT(result.err, HasSubstr("[info]"));  // spdlog's lines, e.g. the model and KV cache
  EXPECT_THAT(result.err, HasSubstr("KV cache"));
  EXPECT_THAT(result.out, Not(HasSubstr("[info]")));
  EXPECT_THAT(result.out, Not(HasSubstr("KV cache")));
  EXPECT_THAT(result.out, Not(HasSubstr("tokens/s")));  // the speed report is stderr's too
}
