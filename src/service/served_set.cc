#include "service/served_set.h"

#include "common/logging.h"
#include "common/strings.h"
#include "config/restart_fields.h"
#include "service/config_source.h"

namespace mmserve {

ServedSetChanges::ServedSetChanges(const BackendRegistry& backends, ModelRegistry& registry,
                                   Lifecycle& lifecycle)
    : backends_(backends), registry_(registry), lifecycle_(lifecycle) {}

Result<ReloadReport> ServedSetChanges::Reload() {
  const ServerConfig current = registry_.config();
  auto next = ReadConfigFile(current.file, backends_, current.model_name);
  if (!next.ok()) return next.status();
  if (current.overrides) current.overrides(next->global);
  return Apply(std::move(*next));
}

void ServedSetChanges::Publish(const std::string& name, std::shared_ptr<const ServedModel> model) {
  // Requests parked on a retired version waiting for its load go where the routing sends them.
  for (const auto& version : registry_.Publish(name, std::move(model))) {
    std::vector<ParkedRequest> waiting = version->TakeWaiting();
    spdlog::info("model {}: retired; unloads when its {} requests in flight are done",
                 version->VersionName(), version->view().in_flight);
    for (auto& parked : waiting) parked.End({});  // routed anew
  }
  lifecycle_.WakeReaper();  // a retired version with nothing in flight goes at once
}

Result<ReloadReport> ServedSetChanges::Apply(ServerConfig next) {
  ReloadReport report;
  const ServerConfig current = registry_.config();
  const ModelRegistry::Models models = registry_.models();
  // What cannot change while serving: reported, and the old values stay.
  report.restart = RestartNeeded(current.global, next.global);
  for (const auto& m : next.models) MMS_RETURN_IF_ERROR(lifecycle_.CheckPlacement(m));

  // Model by model, in the new file's order; models added through the API are kept.
  std::vector<std::string> order;
  std::map<std::string, std::vector<ModelConfig>> wanted;
  for (auto& m : next.models) {
    if (!wanted.count(m.name)) order.push_back(m.name);
    wanted[m.name].push_back(std::move(m));
  }
  std::vector<ModelConfig> served;  // the configs of what is served after this
  auto keep_current = [&](const std::string& name) {
    for (const auto& m : current.models) {
      if (m.name == name) served.push_back(m);
    }
  };
  for (const auto& name : order) {
    const auto old = models.find(name);
    const ServedModel* before = old == models.end() ? nullptr : old->second.get();
    VersionDiff diff = DiffVersions(before, wanted[name], [&](const ModelConfig& m) {
      return lifecycle_.NewVersion(m);
    });
    report.unchanged += diff.unchanged;
    if (Status s = lifecycle_.LoadAll(diff.fresh, /*startup_only=*/true); !s.ok() && before) {
      // Availability first: what served keeps serving; the new versions go.
      report.kept.push_back(name + " (" + std::string(s.message()) + ")");
      for (const auto& [v, version] : diff.fresh) lifecycle_.Unload(*version);
      keep_current(name);
      continue;
    }
    // Routing comes from the new file: an unchanged version keeps its old config.
    auto model = ServedModel::Make(std::move(diff.versions), wanted[name].front(), false);
    if (before) {
      for (const auto& [v, version] : before->versions) {
        if (!model->versions.count(v)) report.retired.push_back(version->VersionName());
      }
      if (!before->SameRouting(*model)) report.rerouted.push_back(name);
    }
    report.added.insert(report.added.end(), diff.added.begin(), diff.added.end());
    report.reloaded.insert(report.reloaded.end(), diff.reloaded.begin(), diff.reloaded.end());
    Publish(name, std::move(model));
    for (auto& m : wanted[name]) served.push_back(std::move(m));
  }
  for (const auto& [name, model] : models) {
    if (wanted.count(name)) continue;
    if (model->from_api) {
      keep_current(name);
      continue;
    }
    for (const auto& [v, version] : model->versions) {
      report.retired.push_back(version->VersionName());
    }
    Publish(name, nullptr);
  }
  registry_.SetServed(std::move(served), next.global);
  spdlog::info("config: reloaded: {}", ReloadSummary(report));
  return report;
}

Result<ReloadReport> ServedSetChanges::LoadModel(const std::string& name,
                                                  std::optional<nlohmann::json> entry) {
  ReloadReport report;
  std::shared_ptr<const ServedModel> before = registry_.Find(name);
  if (!entry) {
    if (!before) {
      return NotFound("unknown model '" + name +
                      "'; to add it, give its entry as parameters.config");
    }
    MMS_RETURN_IF_ERROR(lifecycle_.LoadAll(before->versions, /*startup_only=*/false)
                            .WithContext("model '" + name + "'"));
    for (const auto& [v, e] : before->versions) report.added.push_back(e->VersionName());
    return report;
  }
  // A new or replacing entry: read as if it were in the YAML, files inside the model roots.
  auto configs = ReadModelEntry(name, std::move(*entry), registry_.config(), backends_);
  if (!configs.ok()) return configs.status();
  for (const auto& m : *configs) MMS_RETURN_IF_ERROR(lifecycle_.CheckPlacement(m));
  VersionMap versions;
  for (const auto& m : *configs) versions[m.version] = lifecycle_.NewVersion(m);
  if (Status s = lifecycle_.LoadAll(versions, /*startup_only=*/false); !s.ok()) {
    for (const auto& [v, e] : versions) lifecycle_.Unload(*e);
    return s.WithContext("model '" + name + "'" +
                         (before ? " keeps serving what it served" : " was not added"));
  }
  for (const auto& [v, e] : versions) {
    ((before && before->versions.count(v)) ? report.reloaded : report.added)
        .push_back(e->VersionName());
  }
  if (before) {
    for (const auto& [v, e] : before->versions) report.retired.push_back(e->VersionName());
  }
  Publish(name, ServedModel::Make(std::move(versions), configs->front(), /*from_api=*/true));
  registry_.ReplaceConfigs(name, *configs);
  return report;
}

Result<ReloadReport> ServedSetChanges::UnloadModel(const std::string& name) {
  std::shared_ptr<const ServedModel> model = registry_.Find(name);
  if (!model) return NotFound("unknown model '" + name + "'");
  ReloadReport report;
  for (const auto& [v, version] : model->versions) {
    for (auto& parked : version->TakeWaiting()) {
      parked.End({.kind = WaitEnd::Kind::kFail,
                  .error = Unavailable("model '" + name +
                                       "' was unloaded through the repository API")});
    }
    lifecycle_.Unload(*version, VersionState::kHeld);
    report.retired.push_back(version->VersionName());
  }
  return report;
}

}  // namespace mmserve
