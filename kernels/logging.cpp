#include "runtime/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "runtime/check.h"

namespace tessera {

void log_to_stderr() {
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      previous->name(), std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_level(previous->level());
  spdlog::set_default_logger(std::move(logger));
}

void set_log_level_from_environment() {
  const char* value = std::getenv("TESSERA_LOG_LEVEL");
  if (value == nullptr || *value == '\0') return;
  const std::string name = value;
  static const std::pair<const char*, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},   {"critical", spdlog::level::critical},
      {"off", spdlog::level::off}};
  for (const auto& [level_name, level] : kLevels) {
    if (name == level_name) {
      spdlog::set_level(level);
      return;
    }
  }
  TESSERA_REQUIRE(false,
                  "TESSERA_LOG_LEVEL={} is not a log level; use trace, debug, info, warn, error, "
                  "critical or off",
                  name);
}

}  // namespace tessera
