#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace mmserve {

void ConfigureLogging(std::string_view level) {
  // stderr, so that `mmserve validate` and `doctor` keep stdout for their own output.
  auto logger = spdlog::stderr_color_mt("mmserve");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v");
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace mmserve
