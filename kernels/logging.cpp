#include "kernels/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace tessera {

void log_to_stderr() {
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      previous->name(), std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_level(previous->level());
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace tessera
