#include "engine/cli/command.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "runtime/check.h"

namespace tessera::cli {

namespace {

// Function-local so that registration from other files' static initializers finds it built.
std::vector<std::unique_ptr<Command>>& commands() {
  static std::vector<std::unique_ptr<Command>> table;
  return table;
}

}  // namespace

bool register_command(Command command) {
  TESSERA_CHECK(find_command(command.name) == nullptr, "command '{}' registered twice",
                command.name);
  commands().push_back(std::make_unique<Command>(std::move(command)));
  return true;
}

const Command* find_command(std::string_view name) {
  for (const auto& command : commands()) {
    if (command->name == name) return command.get();
  }
  return nullptr;
}

std::vector<const Command*> all_commands() {
  std::vector<const Command*> sorted;
  for (const auto& command : commands()) sorted.push_back(command.get());
  std::sort(sorted.begin(), sorted.end(),
            [](const Command* a, const Command* b) { return a->name < b->name; });
  return sorted;
}

void expect_no_arguments(std::string_view command_name, const std::vector<std::string>& args) {
  if (args.empty()) return;
  const std::string& first = args.front();
  if (first.starts_with("-")) {
    throw UsageError(
        fmt::format("unknown option '{}' for 'tessera {}' (it takes none)", first, command_name));
  }
  throw UsageError(fmt::format("'tessera {}' takes no arguments, got '{}'", command_name, first));
}

}  // namespace tessera::cli
