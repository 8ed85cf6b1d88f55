// A subcommand of the tessera binary. Each one lives in its own file under engine/cli/ and
// registers itself with one line, TESSERA_REGISTER_COMMAND(make_x_command()); main.cpp finds it
// by name, handles `--help` for it and turns errors into exit statuses. Commands parse their flags
// with a FlagSet (engine/cli/flag_parser.h), which also writes their --help.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::cli {

// Wrong command-line usage (unknown command, option or argument, a bad value): main prints the
// message with a pointer to the command's --help and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Command {
  std::string name;
  std::string summary;  // one line, listed by `tessera --help`
  // Printed by `tessera NAME --help`: synopsis, what it does and prints, its options.
  std::function<std::string()> usage;
  // Receives the arguments after the command's name; returns the process exit status.
  std::function<int(const std::vector<std::string>& args)> run;
};

bool register_command(Command command);
const Command* find_command(std::string_view name);
std::vector<const Command*> all_commands();  // sorted by name

}  // namespace tessera::cli

#define TESSERA_COMMAND_CONCAT_INNER(a, b) a##b
#define TESSERA_COMMAND_CONCAT(a, b) TESSERA_COMMAND_CONCAT_INNER(a, b)
#define TESSERA_REGISTER_COMMAND(command)                                                       \
  [[maybe_unused]] static const bool TESSERA_COMMAND_CONCAT(command_registered_, __COUNTER__) = \
      ::tessera::cli::register_command(command)
