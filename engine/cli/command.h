// A subcommand of the tessera binary. Each one lives in its own file under engine/cli/ and
// registers itself with one line, TESSERA_REGISTER_COMMAND(make_x_command()); main.cpp finds it
// by name, handles `--help` for it and turns errors into exit statuses.
#pragma once

#include <charconv>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::cli {

// Wrong command-line usage (unknown command, option or argument): main prints the message with a
// pointer to --help and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Command {
  std::string name;
  std::string summary;  // one line, listed by `tessera --help`
  std::string usage;    // printed by `tessera NAME --help`: synopsis, options, what it prints
  // Receives the arguments after the command's name; returns the process exit status.
  std::function<int(const std::vector<std::string>& args)> run;
};

bool register_command(Command command);
const Command* find_command(std::string_view name);
std::vector<const Command*> all_commands();  // sorted by name

// `text` as the number `flag` takes; a UsageError naming both when it is not one.
template <typename T>
T parse_number(const std::string& flag, const std::string& text) {
  T value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw UsageError(flag + " expects a number, got '" + text + "'");
  return value;
}

// For commands that take no arguments: throws UsageError naming the first one given.
void expect_no_arguments(std::string_view command_name, const std::vector<std::string>& args);

}  // namespace tessera::cli

#define TESSERA_COMMAND_CONCAT_INNER(a, b) a##b
#define TESSERA_COMMAND_CONCAT(a, b) TESSERA_COMMAND_CONCAT_INNER(a, b)
#define TESSERA_REGISTER_COMMAND(command)                                                       \
  [[maybe_unused]] static const bool TESSERA_COMMAND_CONCAT(command_registered_, __COUNTER__) = \
      ::tessera::cli::register_command(command)
