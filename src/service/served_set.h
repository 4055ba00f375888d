// ServedSetChanges: the loader thread's side of changing what is served — a reload of the YAML
// file, the repository API's load and unload. It reads what the config source gives, diffs it
// against the registry (DiffVersions), loads new and changed versions through the lifecycle,
// then publishes each model's new routing in one step; the versions it replaced retire. A
// model whose new version fails to load keeps serving what it served. Runs on the loader
// thread only (one change at a time, never concurrent with an on-demand load).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/backend_registry.h"
#include "service/lifecycle.h"
#include "service/model_registry.h"

namespace mmserve {

class ServedSetChanges {
 public:
  // Not owned; outlive this.
  ServedSetChanges(const BackendRegistry& backends, ModelRegistry& registry, Lifecycle& lifecycle);

  // Re-reads the YAML file: an invalid file changes nothing and its errors are the outcome;
  // otherwise Apply. Models added by LoadModel that the file does not name are kept.
  Result<ReloadReport> Reload();
  Result<ReloadReport> Apply(ServerConfig next);
  // Loads every version of `name`; with `entry` (a model entry as JSON), adds or replaces the
  // model first (files inside global.model_roots).
  Result<ReloadReport> LoadModel(const std::string& name, std::optional<nlohmann::json> entry);
  // Unloads every version of `name` and holds it unloaded until LoadModel.
  Result<ReloadReport> UnloadModel(const std::string& name);

 private:
  // Publishes `model` under `name` (nullptr removes it); requests parked on the versions it
  // retires are routed anew.
  void Publish(const std::string& name, std::shared_ptr<const ServedModel> model);

  const BackendRegistry& backends_;
  ModelRegistry& registry_;
  Lifecycle& lifecycle_;
};

}  // namespace mmserve
