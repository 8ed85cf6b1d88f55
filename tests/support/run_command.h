// Runs a shell command line as a child process and captures its stdout and stderr apart: for the
// tests that run the built tessera binary or a project script.
#pragma once

#include <string>

namespace tessera::testing {

struct CommandResult {
  int status = -1;  // the exit status; -1 when it did not exit normally
  std::string out, err;
};

CommandResult run_command(const std::string& command_line);

}  // namespace tessera::testing
