// BackendRegistry: the backends compiled into this mmserve, by name, plus the names the schema
// knows but this build lacks (a model naming one validates, then fails to load with a clear
// reason). Implements BackendCatalog for the config validator.
//
// Filled at start-up by the composition root, read-only afterwards (any thread).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "config/backend_catalog.h"

namespace mmserve {

class BackendRegistry final : public BackendCatalog {
 public:
  BackendRegistry();

  void Register(std::unique_ptr<Backend> backend);
  // The backend named `name`, or NotFound / Unimplemented (known but not built in).
  Result<Backend*> Find(const std::string& name) const;
  std::vector<std::string> BuiltIn() const;

  // BackendCatalog
  std::vector<std::string> BackendNames() const override;
  std::vector<std::string> Tasks(const std::string& backend) const override;
  bool NeedsPath(const std::string& backend) const override;
  std::optional<int> DeviceCount(const std::string& backend) const override;
  // A backend the schema knows but this registry lacks is an error once the registry is
  // complete (set_complete: the build's whole set, as the app registers it).
  void ValidateModel(ModelConfig& model, ConfigErrors& errors) const override;
  void set_complete(bool complete) { complete_ = complete; }
  bool ExecutesInline(const ModelConfig& model) const override;
  bool RunsIsolated(const ModelConfig& model) const override;
  bool RunsOpenMp(const ModelConfig& model) const override;

 private:
  // preprocess/postprocess: only on tensor models, and only in a build with OpenCV.
  void ValidateImageStages(const Backend& backend, const ModelConfig& model,
                           ConfigErrors& errors) const;

  std::map<std::string, std::unique_ptr<Backend>> backends_;
  std::map<std::string, std::vector<std::string>> known_tasks_;  // every schema backend
  bool complete_ = false;
};

}  // namespace mmserve
