// The tessera command-line binary: `tessera COMMAND [ARGS]`. Commands register themselves
// (engine/cli/command.h); this file handles the global flags, dispatch and exit statuses:
// 0 success, 1 a runtime error (tessera::Error: bad model, device, config), 2 wrong usage.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "engine/cli/command.h"
#include "runtime/check.h"
#include "runtime/logging.h"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif
#ifndef TESSERA_BUILD_TYPE
#define TESSERA_BUILD_TYPE "unknown"
#endif
#ifndef TESSERA_BUILT_MODULES
#define TESSERA_BUILT_MODULES "unknown"
#endif

namespace tessera::cli {
namespace {

void print_help(std::FILE* stream) {
  fmt::print(
      stream,
      "Tessera: an LLM inference engine that compiles the model's forward into fused kernels.\n"
      "\n"
      "usage: tessera COMMAND [ARGS]\n"
      "       tessera COMMAND --help\n"
      "       tessera --version\n"
      "\n"
      "commands:\n");
  for (const Command* command : all_commands()) {
    fmt::print(stream, "  {:<10} {}\n", command->name, command->summary);
  }
}

void print_version() {
  fmt::print("tessera {}\nGPU modules built: {}; {} build\n", TESSERA_VERSION,
             TESSERA_BUILT_MODULES, TESSERA_BUILD_TYPE);
}

bool is_help_flag(const std::string& arg) {
  return arg == "--help" || arg == "-h";
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("missing command");
  const std::string& first = args.front();
  if (is_help_flag(first)) {
    print_help(stdout);
    return 0;
  }
  if (first == "--version") {
    print_version();
    return 0;
  }
  if (first.starts_with("-")) throw UsageError(fmt::format("unknown option '{}'", first));

  const Command* command = find_command(first);
  if (command == nullptr) {
    std::vector<std::string> names;
    for (const Command* known : all_commands()) names.push_back(known->name);
    throw UsageError(
        fmt::format("unknown command '{}'; commands: {}", first, fmt::join(names, ", ")));
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  for (const std::string& arg : rest) {
    if (is_help_flag(arg)) {
      fmt::print("{}\n", command->usage);
      return 0;
    }
  }
  return command->run(rest);
}

}  // namespace
}  // namespace tessera::cli

int main(int argc, char** argv) {
  tessera::log_to_stderr();
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    tessera::set_log_level_from_environment();
    return tessera::cli::run(args);
  } catch (const tessera::cli::UsageError& error) {
    fmt::print(stderr, "tessera: {}\nRun 'tessera --help' for usage.\n", error.what());
    return 2;
  } catch (const tessera::Error& error) {
    fmt::print(stderr, "tessera: error: {}\n", error.what());
    return 1;
  } catch (const std::exception& error) {
    fmt::print(stderr, "tessera: internal error: {}\n", error.what());
    return 1;
  }
}
