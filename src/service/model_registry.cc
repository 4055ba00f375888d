#include "service/model_registry.h"

#include <algorithm>
#include <charconv>
#include <random>

#include "common/strings.h"

namespace mmserve {

std::string ReloadSummary(const ReloadReport& r) {
  return std::to_string(r.added.size()) + " added, " + std::to_string(r.reloaded.size()) +
         " reloaded, " + std::to_string(r.retired.size()) + " retired, " +
         std::to_string(r.rerouted.size()) + " rerouted, " + std::to_string(r.kept.size()) +
         " kept, " + std::to_string(r.unchanged) + " unchanged" +
         (r.restart.empty() ? "" : "; after a restart: " + Join(r.restart, ", "));
}

namespace {

// A uniform draw in [0, 1): from the request id when it has one (the same id always draws the
// same, so a client's retries stay on one version), else at random.
double CanaryDraw(const std::string& model, const std::string& id) {
  if (id.empty()) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  }
  uint64_t x = std::hash<std::string>{}(model + '\0' + id);
  // splitmix64's finalizer: std::hash of strings need not mix its high bits well.
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

}  // namespace

Result<int64_t> ParseVersion(std::string_view text, std::string_view field) {
  if (text.empty()) return int64_t{0};
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1) {
    return InvalidArgument(std::string(field) + ": expected a positive integer, found '" +
                           std::string(text) + "'");
  }
  return v;
}

std::shared_ptr<const ServedModel> ServedModel::Make(VersionMap versions,
                                                     const ModelConfig& routing, bool from_api) {
  auto model = std::make_shared<ServedModel>();
  model->labels = routing.labels;
  model->canary = routing.canary;
  auto stable = model->labels.find("stable");
  model->default_version =
      stable != model->labels.end() ? stable->second : versions.rbegin()->first;
  model->versions = std::move(versions);
  model->from_api = from_api;
  return model;
}

bool ServedModel::SameRouting(const ServedModel& other) const {
  return labels == other.labels && default_version == other.default_version &&
         canary.has_value() == other.canary.has_value() &&
         (!canary ||
          (canary->version == other.canary->version && canary->weight == other.canary->weight));
}

VersionDiff DiffVersions(
    const ServedModel* before, const std::vector<ModelConfig>& wanted,
    const std::function<std::shared_ptr<ModelVersion>(const ModelConfig&)>& make) {
  VersionDiff diff;
  for (const auto& m : wanted) {
    const std::string name = m.name + " v" + std::to_string(m.version);
    if (before) {
      auto it = before->versions.find(m.version);
      if (it != before->versions.end() && it->second->config().fingerprint == m.fingerprint) {
        diff.versions[m.version] = it->second;
        ++diff.unchanged;
        continue;
      }
      (it == before->versions.end() ? diff.added : diff.reloaded).push_back(name);
    } else {
      diff.added.push_back(name);
    }
    diff.versions[m.version] = diff.fresh[m.version] = make(m);
  }
  return diff;
}

ModelRegistry::ModelRegistry(ServerConfig config, const TimeSource& time)
    : time_(time), config_(std::move(config)) {}

Result<std::shared_ptr<ModelVersion>> ModelRegistry::Route(const ServedModel& model,
                                                           const ModelRef& ref,
                                                           const std::string& request_id) {
  int64_t version = ref.version;
  if (version == 0 && !ref.label.empty()) {
    auto it = model.labels.find(std::string(ref.label));
    if (it == model.labels.end()) {
      std::vector<std::string> labels;
      for (const auto& [label, v] : model.labels) labels.push_back(label);
      return NotFound("model '" + std::string(ref.name) + "' has no label '" +
                      std::string(ref.label) + "'" +
                      (labels.empty() ? " (it has none)"
                                      : " (its labels: " + Join(labels, ", ") + ")"));
    }
    version = it->second;
  }
  if (version == 0) {
    version = model.canary && CanaryDraw(std::string(ref.name), request_id) < model.canary->weight
                  ? model.canary->version
                  : model.default_version;
  }
  auto it = model.versions.find(version);
  if (it == model.versions.end()) {
    std::vector<std::string> served;
    for (const auto& [v, entry] : model.versions) served.push_back(std::to_string(v));
    return NotFound("model '" + std::string(ref.name) + "' has no version " +
                    std::to_string(version) +
                    " (it serves " + Join(served, ", ") + ")");
  }
  return it->second;
}

Result<std::shared_ptr<ModelVersion>> ModelRegistry::RouteLocked(
    const ModelRef& ref, const std::string& request_id) const {
  auto model = models_.find(ref.name);
  if (model == models_.end()) return NotFound("unknown model '" + std::string(ref.name) + "'");
  return Route(*model->second, ref, request_id);
}

Result<ModelDescription> ModelRegistry::Describe(const ModelRef& ref,
                                                 const std::string& request_id) const {
  std::shared_ptr<ModelVersion> version;
  {
    ReaderLock lock(mu_);
    auto routed = RouteLocked(ref, request_id);
    if (!routed.ok()) return routed.status();
    version = std::move(*routed);
  }
  return ModelDescription{.version = version, .signature = version->signature()};
}

ModelInfo ModelRegistry::SnapshotOf(const ModelVersion& version, const ServedModel& model) {
  ModelInfo info = version.Snapshot();
  for (const auto& [v, e] : model.versions) info.versions.push_back(v);
  info.labels = model.labels;
  return info;
}

Result<ModelInfo> ModelRegistry::Get(const ModelRef& ref) const {
  ReaderLock lock(mu_);
  auto it = models_.find(ref.name);
  if (it == models_.end()) return NotFound("unknown model '" + std::string(ref.name) + "'");
  const ServedModel& model = *it->second;
  ModelRef pinned = ref;
  if (pinned.version == 0 && pinned.label.empty()) pinned.version = model.default_version;
  auto version = Route(model, pinned, {});
  if (!version.ok()) return version.status();
  return SnapshotOf(**version, model);
}

std::vector<ModelInfo> ModelRegistry::List() const {
  ReaderLock lock(mu_);
  std::vector<ModelInfo> out;
  for (const auto& m : config_.models) {
    auto model = models_.find(m.name);
    if (model == models_.end()) continue;
    auto version = model->second->versions.find(m.version);
    if (version == model->second->versions.end()) continue;
    out.push_back(SnapshotOf(*version->second, *model->second));
  }
  return out;
}

std::vector<std::string> ModelRegistry::NamesServing(const std::string& task) const {
  ReaderLock lock(mu_);
  std::vector<std::string> names;
  for (const auto& m : config_.models) {
    if (m.task == task && models_.count(m.name) &&
        std::find(names.begin(), names.end(), m.name) == names.end()) {
      names.push_back(m.name);
    }
  }
  return names;
}

std::shared_ptr<const ServedModel> ModelRegistry::Find(const std::string& name) const {
  ReaderLock lock(mu_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

ModelRegistry::Models ModelRegistry::models() const {
  ReaderLock lock(mu_);
  return models_;
}

std::vector<std::shared_ptr<ModelVersion>> ModelRegistry::All() const {
  ReaderLock lock(mu_);
  std::vector<std::shared_ptr<ModelVersion>> out = retiring_;
  for (const auto& [name, model] : models_) {
    for (const auto& [version, entry] : model->versions) out.push_back(entry);
  }
  return out;
}

std::vector<std::shared_ptr<ModelVersion>> ModelRegistry::Retiring() const {
  ReaderLock lock(mu_);
  return retiring_;
}

void ModelRegistry::EraseRetiring(const std::shared_ptr<ModelVersion>& version) {
  WriterLock lock(mu_);
  std::erase(retiring_, version);
}

std::vector<std::shared_ptr<ModelVersion>> ModelRegistry::StartupVersions() const {
  ReaderLock lock(mu_);
  std::vector<std::shared_ptr<ModelVersion>> out;
  for (const auto& m : config_.models) {
    if (m.load == LoadMode::kStartup) out.push_back(models_.at(m.name)->versions.at(m.version));
  }
  return out;
}

ServerConfig ModelRegistry::config() const {
  ReaderLock lock(mu_);
  return config_;
}

std::optional<std::chrono::milliseconds> ModelRegistry::watch() const {
  ReaderLock lock(mu_);
  return config_.global.watch;
}

std::vector<std::shared_ptr<ModelVersion>> ModelRegistry::Publish(
    const std::string& name, std::shared_ptr<const ServedModel> model) {
  std::vector<std::shared_ptr<ModelVersion>> retired;
  WriterLock lock(mu_);
  auto it = models_.find(name);
  if (it != models_.end()) {
    for (const auto& [v, version] : it->second->versions) {
      const bool kept = model && model->versions.count(v) && model->versions.at(v) == version;
      if (!kept) retired.push_back(version);
    }
  }
  if (model) {
    models_[name] = std::move(model);
  } else if (it != models_.end()) {
    models_.erase(it);
  }
  const auto by = time_.Now() + config_.global.drain_timeout;
  for (const auto& version : retired) {
    version->Retire(by);
    retiring_.push_back(version);
  }
  return retired;
}

void ModelRegistry::SetServed(std::vector<ModelConfig> models, const GlobalConfig& next) {
  WriterLock lock(mu_);
  config_.models = std::move(models);
  config_.global.watch = next.watch;
  config_.global.model_roots = next.model_roots;
}

void ModelRegistry::ReplaceConfigs(const std::string& name,
                                   const std::vector<ModelConfig>& configs) {
  WriterLock lock(mu_);
  std::erase_if(config_.models, [&](const ModelConfig& m) { return m.name == name; });
  for (const auto& m : configs) config_.models.push_back(m);
}

}  // namespace mmserve
