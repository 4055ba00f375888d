#include "service/access_log.h"

#include <cctype>
#include <cstdio>

#include "backend/generate_contract.h"
#include "common/json.h"

namespace mmserve {
namespace {

constexpr size_t kMaxValue = 256;  // longer client values are cut (a log line stays a line)

std::string Clip(std::string value) {
  if (value.size() > kMaxValue) value = value.substr(0, kMaxValue) + "...";
  return value;
}

// A value as is when it is plain, else as a JSON string (quoted, escaped, invalid UTF-8
// replaced).
std::string TextValue(const std::string& value) {
  bool plain = !value.empty();
  for (unsigned char c : value) {
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == '/' || c == ':')) {
      plain = false;
      break;
    }
  }
  if (plain) return value;
  return DumpJson(value);
}

std::string Millis(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

}  // namespace

std::string FormatAccess(const AccessEntry& e, LogFormat format) {
  if (format == LogFormat::kJson) {
    // No id is no field (the text line's id=-), not an empty string.
    nlohmann::json j = {{"route", Clip(e.route)},
                        {"model", Clip(e.model)},    {"status", e.status},
                        {"total_ms", e.total_ms}};
    if (!e.id.empty()) j["id"] = Clip(e.id);
    if (e.version > 0) j["version"] = e.version;
    if (!e.error.empty()) j["error"] = Clip(e.error);
    if (e.queue_ms) j["queue_ms"] = *e.queue_ms;
    if (e.compute_ms) j["compute_ms"] = *e.compute_ms;
    if (e.tokens_in) j["tokens_in"] = *e.tokens_in;
    if (e.tokens_out) j["tokens_out"] = *e.tokens_out;
    if (e.tokens_cached) j["tokens_cached"] = *e.tokens_cached;
    return DumpJson(j);
  }
  std::string line = "access id=" + (e.id.empty() ? "-" : TextValue(Clip(e.id))) +
                     " route=" + TextValue(Clip(e.route)) + " model=" + TextValue(Clip(e.model)) +
                     " version=" + (e.version > 0 ? std::to_string(e.version) : "-") +
                     " status=" + e.status;
  if (e.queue_ms) line += " queue_ms=" + Millis(*e.queue_ms);
  if (e.compute_ms) line += " compute_ms=" + Millis(*e.compute_ms);
  line += " total_ms=" + Millis(e.total_ms);
  if (e.tokens_in) line += " tokens_in=" + std::to_string(*e.tokens_in);
  if (e.tokens_out) line += " tokens_out=" + std::to_string(*e.tokens_out);
  if (e.tokens_cached) line += " tokens_cached=" + std::to_string(*e.tokens_cached);
  if (!e.error.empty()) line += " error=" + TextValue(Clip(e.error));
  return line;
}

void LogAccessOnAnswer(InferRequest& request) {
  if (!AccessLogger().should_log(spdlog::level::info)) return;
  AccessEntry entry{.id = !request.trace_id.empty() ? request.trace_id : request.id,
                    .route = request.route,
                    .model = request.model_name,
                    .version = request.model_version};
  request.done = [entry = std::move(entry), arrival = request.arrival,
                  done = std::move(request.done)](Result<InferResponse> result) mutable {
    entry.total_ms = static_cast<double>(Nanos(Clock::now() - arrival)) / 1e6;
    entry.status = StatusCodeName(result.status().code());
    if (result.ok()) {
      const InferResponse& r = *result;
      entry.version = r.model_version;
      if (r.queue_ns > 0 || r.compute_ns > 0) {
        entry.queue_ms = static_cast<double>(r.queue_ns) / 1e6;
        entry.compute_ms = static_cast<double>(r.compute_ns) / 1e6;
      }
      if (r.parameters.contains(generate::kPromptTokens)) {
        entry.tokens_in = NumberParam<int64_t>(r.parameters, generate::kPromptTokens, 0);
      }
      if (r.parameters.contains(generate::kCompletionTokens)) {
        entry.tokens_out = NumberParam<int64_t>(r.parameters, generate::kCompletionTokens, 0);
      }
      if (r.parameters.contains(generate::kCachedTokens)) {
        entry.tokens_cached = NumberParam<int64_t>(r.parameters, generate::kCachedTokens, 0);
      }
    } else {
      entry.error = std::string(result.status().message());
    }
    AccessLogger().info("{}", FormatAccess(entry, CurrentLogFormat()));
    done(std::move(result));
  };
}

}  // namespace mmserve
