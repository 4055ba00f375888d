// ModelRegistry: the served set — each model name with its versions, labels and canary — and
// the routing of a request to one version. It decides nothing about loading: it holds what the
// config source and the repository API asked for, and the lifecycle loads what it holds.
//
// Routing: a request names a version (`/versions/{v}`), a label (`/labels/{l}`), or neither;
// then it goes to the canary version with the canary's weight (sticky per request id when it
// has one), else to the version labelled `stable`, else to the highest version.
//
// Publishing a model replaces its routing in one step. The versions it no longer serves retire:
// they take no new requests, finish the ones they hold, then unload (the lifecycle's reaper).
//
// Thread-safety: every method may be called from any thread. A published ServedModel is
// immutable; versions carry their own lock.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "config/model_config.h"
#include "service/model_version.h"

namespace mmserve {

// A model as a client names it: a name and at most one of a version or a label.
// A view: it does not own the strings, and lives for one call.
struct ModelRef {
  std::string_view name;
  int64_t version = 0;  // 0: routed by label, canary or default
  std::string_view label;
};

// A version as a client spells it (a URL segment, a gRPC field): "" → 0 (the registry routes);
// otherwise a positive integer, or an error that names `field`.
Result<int64_t> ParseVersion(std::string_view text, std::string_view field);

using VersionMap = std::map<int64_t, std::shared_ptr<ModelVersion>>;

// One name: its versions and routing. Immutable once published.
struct ServedModel {
  VersionMap versions;  // at least one
  std::map<std::string, int64_t> labels;
  std::optional<CanaryConfig> canary;
  int64_t default_version = 0;  // `stable`, else the highest version
  bool from_api = false;        // added by LoadModel: kept when a reload's file does not name it

  // A model of `versions` with the labels and canary of `routing` (any of its new configs).
  static std::shared_ptr<const ServedModel> Make(VersionMap versions, const ModelConfig& routing,
                                                 bool from_api);
  bool SameRouting(const ServedModel& other) const;
};

// What a change of the served set did, model by model ("embedder v2").
struct ReloadReport {
  std::vector<std::string> added;      // versions (or models) now served that were not
  std::vector<std::string> reloaded;   // versions loaded anew because their fingerprint changed
  std::vector<std::string> retired;    // versions no longer served (unloading once idle)
  std::vector<std::string> rerouted;   // models whose labels or canary changed
  std::vector<std::string> kept;       // models left as they were because a new version failed
  std::vector<std::string> restart;    // global settings that take effect after a restart
  int unchanged = 0;                   // versions untouched
};
// "1 added, 0 reloaded, ... 3 unchanged[; after a restart: ...]": the reload's log line and event.
std::string ReloadSummary(const ReloadReport& report);

// How a model's versions change when its new configs replace what `before` serves: unchanged
// versions (same fingerprint) are kept, the others are made anew by `make`.
struct VersionDiff {
  VersionMap versions;  // every version of the new model
  VersionMap fresh;     // those made anew: they load before the model is published
  std::vector<std::string> added, reloaded;
  int unchanged = 0;
};
VersionDiff DiffVersions(const ServedModel* before, const std::vector<ModelConfig>& wanted,
                         const std::function<std::shared_ptr<ModelVersion>(const ModelConfig&)>& make);

class ModelRegistry {
 public:
  using Models = std::map<std::string, std::shared_ptr<const ServedModel>, std::less<>>;

  // `config`: what is served (its models are published by the caller). `time` (not owned)
  // dates retirements.
  ModelRegistry(ServerConfig config, const TimeSource& time);

  // Routes `ref` (with `request_id` for a sticky canary draw) and calls `f(version)` with the
  // registry's lock held, so that a version a Publish retires either saw `f` run or was never
  // chosen. Returns the routing error, or what `f` returns.
  // With `pinned` (a version Describe chose): that version, unless it has retired since;
  // then `ref` is routed anew.
  template <typename F>
  Status RouteAnd(const ModelRef& ref, const std::string& request_id,
                  const std::shared_ptr<ModelVersion>& pinned, F&& f) const {
    ReaderLock lock(mu_);
    if (pinned && !pinned->retired()) return f(pinned);
    auto routed = RouteLocked(ref, request_id);
    if (!routed.ok()) return routed.status();
    return f(*routed);
  }
  // The version a request for `ref` goes to now, and its signature: what a frontend checks a
  // request against before it submits it pinned to that version.
  Result<ModelDescription> Describe(const ModelRef& ref, const std::string& request_id = {}) const;
  // For metadata and readiness: without version or label, the default version (no canary draw).
  Result<ModelInfo> Get(const ModelRef& ref) const;
  std::vector<ModelInfo> List() const;  // every version in file order
  // The names of the models serving `task`, each once, in file order (no snapshot taken).
  std::vector<std::string> NamesServing(const std::string& task) const;

  std::shared_ptr<const ServedModel> Find(const std::string& name) const;
  Models models() const;
  std::vector<std::shared_ptr<ModelVersion>> All() const;  // published and retiring versions
  std::vector<std::shared_ptr<ModelVersion>> Retiring() const;
  void EraseRetiring(const std::shared_ptr<ModelVersion>& version);
  std::vector<std::shared_ptr<ModelVersion>> StartupVersions() const;  // in file order
  ServerConfig config() const;
  std::optional<std::chrono::milliseconds> watch() const;  // global.watch as served now

  // Publishes `model` under `name` (nullptr removes it). The versions of the model it replaces
  // that it does not keep retire, to unload by `now + drain_timeout` at the latest; they are
  // returned.
  std::vector<std::shared_ptr<ModelVersion>> Publish(const std::string& name,
                                                     std::shared_ptr<const ServedModel> model);
  // After a reload: the model configs now served and the global settings that change live.
  void SetServed(std::vector<ModelConfig> models, const GlobalConfig& next);
  // After the repository API replaced `name`: its configs.
  void ReplaceConfigs(const std::string& name, const std::vector<ModelConfig>& configs);

 private:
  // The version's snapshot with its model's versions and labels.
  static ModelInfo SnapshotOf(const ModelVersion& version, const ServedModel& model);
  static Result<std::shared_ptr<ModelVersion>> Route(const ServedModel& model,
                                                     const ModelRef& ref,
                                                     const std::string& request_id);
  Result<std::shared_ptr<ModelVersion>> RouteLocked(const ModelRef& ref,
                                                    const std::string& request_id) const
      REQUIRES_SHARED(mu_);

  const TimeSource& time_;
  mutable SharedMutex mu_;
  ServerConfig config_ GUARDED_BY(mu_);  // what is served now
  Models models_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<ModelVersion>> retiring_ GUARDED_BY(mu_);
};

}  // namespace mmserve
