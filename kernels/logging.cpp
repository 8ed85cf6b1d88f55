#include "kernels/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>

#include "kernels/check.h"

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
  for (auto level :
       {spdlog::level::trace, spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
        spdlog::level::err, spdlog::level::critical, spdlog::level::off}) {
    const auto view = spdlog::level::to_string_view(level);
    if (name == std::string(view.data(), view.size()) ||
        (name == "error" && level == spdlog::level::err)) {
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
