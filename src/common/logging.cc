#include "common/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>

#include "common/json.h"
#include "common/strings.h"

namespace mmserve {
namespace {

std::atomic<LogFormat> g_format{LogFormat::kText};
std::atomic<bool> g_access_log{true};

// {"time":"…Z","level":"info","thread":N,"logger":"mmserve","msg":"…"}: a JSON object per
// line. The access logger's message is already a JSON object of its fields; its members join
// the line's instead of becoming a string.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since = msg.time.time_since_epoch();
    const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since).count();
    const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since).count() % 1000;
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char time[40];
    const size_t n = std::strftime(time, sizeof time, "%Y-%m-%dT%H:%M:%S", &utc);
    std::snprintf(time + n, sizeof time - n, ".%03dZ", static_cast<int>(millis));
    const auto level = spdlog::level::to_string_view(msg.level);
    std::string line = "{\"time\":\"" + std::string(time) + "\",\"level\":\"" +
                       std::string(level.data(), level.size()) +
                       "\",\"thread\":" + std::to_string(msg.thread_id) + ",\"logger\":" +
                       DumpJson(std::string(msg.logger_name.data(), msg.logger_name.size()));
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    if (msg.logger_name == "access" && payload.size() > 2 && payload.front() == '{') {
      line += "," + std::string(payload.substr(1));
    } else {
      // Replaces invalid UTF-8 rather than throwing: a message may quote a client's bytes.
      line += ",\"msg\":" +
              DumpJson(nlohmann::json(std::string(payload))) +
              "}";
    }
    line += "\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

// The text format's pattern, with the message's control characters escaped (EscapeControl): a
// message may quote a client's or a model file's bytes, and a raw newline or escape sequence
// would forge a log line or take over the operator's terminal.
class TextFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    // Most lines (every access line) hold nothing to escape: no copy for them. 0xc2 leads the
    // C1 controls' encoding; a line with other text in that row is escaped, unchanged.
    if (std::none_of(payload.begin(), payload.end(), [](char c) {
          const auto byte = static_cast<unsigned char>(c);
          return byte < 0x20 || byte == 0x7f || byte == 0xc2;
        })) {
      return pattern_.format(msg, dest);
    }
    const std::string escaped = EscapeControl(payload);
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(escaped.data(), escaped.size());
    pattern_.format(copy, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<TextFormatter>();
  }

 private:
  spdlog::pattern_formatter pattern_{"%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%t] %v"};
};

std::shared_ptr<spdlog::logger> LoggerNamed(const std::string& name) {
  if (auto logger = spdlog::get(name)) return logger;
  // stderr, so that `mmserve validate` and `doctor` keep stdout for their own output.
  return spdlog::stderr_color_mt(name);
}

}  // namespace

void ConfigureLogging(std::string_view level, LogFormat format, bool access_log) {
  auto logger = LoggerNamed("mmserve");
  auto access = LoggerNamed("access");
  spdlog::set_default_logger(logger);
  g_format = format;
  for (const auto& l : {logger, access}) {
    if (format == LogFormat::kJson) {
      l->set_formatter(std::make_unique<JsonFormatter>());
    } else {
      l->set_formatter(std::make_unique<TextFormatter>());
    }
    l->flush_on(spdlog::level::info);
  }
  g_access_log = access_log;
  SetLogLevel(level);
}

void SetLogLevel(std::string_view level) {
  const auto parsed = spdlog::level::from_str(std::string(level));
  LoggerNamed("mmserve")->set_level(parsed);
  LoggerNamed("access")->set_level(g_access_log ? parsed : spdlog::level::off);
}

LogFormat CurrentLogFormat() { return g_format; }

spdlog::logger& AccessLogger() {
  static const std::shared_ptr<spdlog::logger> logger = LoggerNamed("access");
  return *logger;
}

}  // namespace mmserve
