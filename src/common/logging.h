// Logging goes through spdlog's default logger; this header fixes its format once. Two
// formats: text (time, level, thread, message) for a terminal, and JSON lines for a log
// collector (every message escaped; access lines carry their fields as JSON members).
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace mmserve {

enum class LogFormat { kText, kJson };

// Sets the default logger's level ("trace".."off") and format, and the access logger's: on at
// the same level, or off.
void ConfigureLogging(std::string_view level, LogFormat format = LogFormat::kText,
                      bool access_log = true);
LogFormat CurrentLogFormat();
// Changes the level afterwards (the served config's global.log_level); the access log follows
// it unless it was turned off.
void SetLogLevel(std::string_view level);

// One line per answered request (server/access_log.h writes them); named "access".
spdlog::logger& AccessLogger();

}  // namespace mmserve
