// Logging goes through spdlog's default logger; this header fixes its format once.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace mmserve {

// Sets the default logger's level ("trace".."off") and a format with time, level and thread id.
void ConfigureLogging(std::string_view level);

}  // namespace mmserve
