// BackendCatalog: what the config validator needs to know about backends, implemented by the
// backend layer (BackendRegistry) and handed down to ParseConfig. It keeps the dependency arrow
// pointing down: config never includes backend headers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config_error.h"
#include "config/model_config.h"

namespace mmserve {

class BackendCatalog {
 public:
  virtual ~BackendCatalog() = default;

  // Every backend name the schema accepts, built in or not.
  virtual std::vector<std::string> BackendNames() const = 0;
  // The tasks a backend serves; the first is its default.
  virtual std::vector<std::string> Tasks(const std::string& backend) const = 0;
  virtual bool NeedsPath(const std::string& backend) const = 0;
  // The number of devices the backend's runtime sees, or nullopt when that runtime is absent
  // (then device ids are not range-checked).
  virtual std::optional<int> DeviceCount(const std::string& backend) const = 0;
  // Checks `model.params` (and any backend rule on other fields); adds each problem to `errors`.
  // A backend this build lacks is an error. Completes what the model's file tells (the task of
  // an entry that names none).
  virtual void ValidateModel(ModelConfig& model, ConfigErrors& errors) const = 0;
  // Whether `model` may run with `execution: inline`: its executions never block.
  virtual bool ExecutesInline(const ModelConfig& model) const { return false; }
  // Whether `model` may run with `isolation: process`: this build can serve it from a worker.
  virtual bool RunsIsolated(const ModelConfig& model) const { return false; }
  // Whether `model`'s engine runs OpenMP compute threads (whose wait `compute_wait` sets).
  virtual bool RunsOpenMp(const ModelConfig& model) const { return false; }
};

}  // namespace mmserve
