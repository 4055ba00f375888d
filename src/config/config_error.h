// ConfigError: one problem found in a YAML file, located precisely enough to fix it blind:
//   models.yaml:12:17: models[0].timeout_ms: expected an integer in 1..3600000, found "fast"
// ConfigErrors collects them, so that every error in a file is reported at once.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace mmserve {

struct SourceLocation {
  std::string file;
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based
  std::string ToString() const;  // "file:line:col"
};

struct ConfigError {
  SourceLocation where;
  std::string field;     // "models[0].timeout_ms"
  std::string expected;  // "an integer in 1..3600000"
  std::string found;     // "\"fast\""
  std::string hint;      // optional: "did you mean 'timeout_ms'?"
  std::string ToString() const;
};

class ConfigErrors {
 public:
  // An error already collected (the same text, e.g. from a second version sharing the field)
  // is not added again.
  void Add(ConfigError error);
  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }
  const std::vector<ConfigError>& errors() const { return errors_; }
  // InvalidArgument listing every error, one per line; OK when empty.
  Status ToStatus() const;

 private:
  std::vector<ConfigError> errors_;
};

}  // namespace mmserve
