#include "config/config_error.h"

namespace mmserve {

std::string SourceLocation::ToString() const {
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string ConfigError::ToString() const {
  std::string out = where.ToString() + ": " + field + ": expected " + expected + ", found " + found;
  if (!hint.empty()) out += " (" + hint + ")";
  return out;
}

void ConfigErrors::Add(ConfigError error) {
  const std::string text = error.ToString();
  for (const auto& e : errors_) {
    if (e.ToString() == text) return;
  }
  errors_.push_back(std::move(error));
}

Status ConfigErrors::ToStatus() const {
  if (errors_.empty()) return Status::Ok();
  std::string message = std::to_string(errors_.size()) + " configuration error" +
                        (errors_.size() == 1 ? "" : "s") + ":";
  for (const auto& e : errors_) message += "\n  " + e.ToString();
  return InvalidArgument(std::move(message));
}

}  // namespace mmserve
