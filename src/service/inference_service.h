// InferenceService: the in-process API every frontend calls. It owns the served models — each
// a name with one or more versions, labels and an optional canary — loads them, routes and
// validates requests, queues them on the chosen version's ModelScheduler, changes the served set
// while serving (reload of the YAML, the repository API's load and unload) and unloads
// everything in reverse load order at shutdown.
//
//   version state: kNotLoaded ──load──► kLoading ──ok──► kReady ──shutdown / idle / retire──► kUnloading ─► kNotLoaded
//                                             └──error──► kUnavailable (reason kept)
//
// Routing: a request names a version (`/versions/{v}`), a label (`/labels/{l}`), or neither;
// then it goes to the canary version with the canary's weight (sticky per request id when it
// has one), else to the version labelled `stable`, else to the highest version.
//
// Loading: `load: startup` versions load in LoadStartupModels(); `load: on_demand` versions (and
// versions unloaded after `keep_alive` of idleness) load on their first request, on the loader
// thread, exactly once however many requests arrive meanwhile: those wait (bounded by their own
// deadlines) and are submitted when the load is done, or answered with its error. Requests to
// loaded versions never wait on a load.
//
// Changing the served set (Reload, LoadModel, UnloadModel) runs on the loader thread too, so
// loads stay one at a time. It is availability-preserving: a model's new or changed versions
// load first, then the model's routing switches to them in one step, and the versions it
// replaced retire — they take no new requests, finish the ones they hold, then unload. A model
// whose new version fails to load keeps serving what it served.
//
// Thread-safety: every public method may be called from any thread. Submit() never blocks on a
// device; the outcome arrives through the request's `done` callback, on a worker thread or on
// the caller's thread for requests rejected at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend_registry.h"
#include "config/model_config.h"
#include "runtime/runtime_guard.h"
#include "scheduler/model_scheduler.h"
#include "service/job_store.h"

namespace mmserve {

enum class ModelState { kNotLoaded, kLoading, kReady, kUnavailable, kUnloading };
std::string_view ModelStateName(ModelState state);  // "READY", as the repository API spells it

// A snapshot of one model version for metadata, readiness and listings.
struct ModelInfo {
  ModelConfig config;
  ModelState state = ModelState::kNotLoaded;
  std::string reason;         // why it is not ready, when it is not
  ModelSignature signature;   // empty until loaded
  MemoryEstimate estimate;
  int64_t measured_bytes = 0;  // the heap's growth while it loaded (bytes allocated)
  int64_t resident_bytes = 0;  // what the session reports holding now
  std::map<std::string, int64_t> counters;  // the session's engine counters
  std::optional<SchedulerStats> stats;      // while loaded
  int64_t loads = 0;                        // loads started so far
  int64_t evictions = 0;                    // unloads to make room for another model
  std::chrono::nanoseconds last_load_time{0};  // how long the last successful load took
  int64_t in_flight = 0;                    // requests submitted and not yet answered
  std::vector<int64_t> versions;            // every version the model serves, ascending
  std::map<std::string, int64_t> labels;    // the model's labels
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

class InferenceService {
 public:
  // `backends` and `guard` are not owned and must outlive the service.
  InferenceService(ServerConfig config, const BackendRegistry& backends, RuntimeGuard& guard);
  ~InferenceService();  // unloads whatever is still loaded

  // Loads every `load: startup` version, in file order. A version that fails to load becomes
  // kUnavailable with the reason and the others carry on.
  void LoadStartupModels();

  bool Ready() const;  // every startup model is ready and the service accepts requests
  bool accepting() const { return accepting_.load(); }

  // NotFound for an unknown model, version or label. Neither version nor label: the version an
  // unversioned request is served by when no canary draws it (stable, else the highest).
  Result<ModelInfo> GetModel(const std::string& name, int64_t version = 0,
                             const std::string& label = {}) const;
  // Every version of every model, in file order (models added through LoadModel last).
  std::vector<ModelInfo> ListModels() const;

  // Routes `request` to a version, validates it against that version and queues it. Always
  // takes ownership: the outcome, including a rejection, is delivered through request->done
  // exactly once, with InferResponse::model_version set to the version that served it.
  void Submit(std::unique_ptr<InferRequest> request);

  // Changes of the served set, run one at a time on the loader thread; `done` gets the outcome
  // there. Reload re-reads the YAML file: an invalid file changes nothing and its errors are the
  // outcome; otherwise added models load, removed ones retire, changed versions load anew and
  // then replace the old. Models added by LoadModel that the file does not name are kept.
  using ReloadDone = std::function<void(const Result<ReloadReport>&)>;
  void Reload(ReloadDone done);
  // The repository API: LoadModel loads every version of `name` (clearing an UnloadModel); with
  // `entry` (a model entry as under `models:`, as JSON), adds or replaces the model first — its
  // files must lie inside global.model_roots. UnloadModel unloads every version and keeps the
  // model unloaded (requests get 503) until LoadModel.
  void LoadModel(const std::string& name, std::optional<nlohmann::json> entry, ReloadDone done);
  void UnloadModel(const std::string& name, ReloadDone done);

  // Stops accepting, waits up to `drain_timeout` for requests in flight, then unloads every
  // model in reverse load order, logging one line per step. Idempotent.
  void Shutdown(std::chrono::milliseconds drain_timeout);

  int64_t in_flight() const { return in_flight_.load(); }
  JobStore& jobs() { return jobs_; }

 private:
  struct LoadedModel;
  struct Entry;  // one version
  struct Model;  // one name: its versions and routing; immutable once published
  using Models = std::map<std::string, std::shared_ptr<const Model>>;

  std::shared_ptr<Entry> MakeEntry(const ModelConfig& config) const;
  // A model of `versions` with the labels and canary of `routing` (any of its new configs).
  static std::shared_ptr<const Model> MakeModel(std::map<int64_t, std::shared_ptr<Entry>> versions,
                                                const ModelConfig& routing, bool from_api);
  // Every entry: published versions and retiring ones. REQUIRES: models_mu_ held (shared).
  std::vector<std::shared_ptr<Entry>> AllEntriesLocked() const;
  std::vector<std::shared_ptr<Entry>> AllEntries() const;
  // The version `request` goes to (its version, its label, the canary's draw or the default).
  // REQUIRES: models_mu_ held (shared).
  static Result<std::shared_ptr<Entry>> Route(const Model& model, const InferRequest& request);

  void Load(Entry& entry);
  // Unloads `entry`; with `if_idle_at`, only when nothing is in flight and it has been idle
  // for its keep_alive at that time (and then its next request loads it again).
  // With `evict`, only when nothing is in flight (and then it loads again on demand).
  void Unload(Entry& entry, std::optional<Clock::time_point> if_idle_at = std::nullopt,
              bool evict = false);
  // Before `loading` loads `bytes` more: evicts idle, unpinned models of its device, lowest
  // priority first, then least recently used, until they fit in the budget; Unavailable with
  // what is needed, free and held by whom when they cannot.
  Status MakeRoom(const Entry& loading, int64_t bytes);
  static int64_t Footprint(const Entry& entry);  // REQUIRES: entry.mu held
  static Status ValidateRequest(const ModelSignature& signature, const InferRequest& request);
  // Applies the request parameters `priority` and `timeout` (µs; it may only shorten).
  static Status ApplySchedulingParams(InferRequest& request);
  static ModelInfo Snapshot(const Entry& entry, const Model* model);

  // Runs `task` on the loader thread, after those queued before it.
  void Post(std::function<void()> task);
  // The loader thread's side of Reload/LoadModel/UnloadModel.
  Result<ReloadReport> ApplyConfig(ServerConfig next);
  Result<ReloadReport> DoLoadModel(const std::string& name, std::optional<nlohmann::json> entry);
  Result<ReloadReport> DoUnloadModel(const std::string& name);
  // Loads the start-up versions among `versions` that are not loaded; the first failure.
  Status LoadVersions(const std::map<int64_t, std::shared_ptr<Entry>>& versions,
                      bool startup_only);
  // Publishes `model` under `name` (nullptr removes it) and retires the versions of the model it
  // replaces that it does not keep.
  void Publish(const std::string& name, std::shared_ptr<const Model> model);
  // A device or memory domain the server did not lock or budget at start: what is wrong.
  Status CheckPlacement(const ModelConfig& config) const;

  const BackendRegistry& backends_;  // not owned
  RuntimeGuard& guard_;              // not owned

  JobStore jobs_;  // before the models: outlives every model's callbacks
  // Per memory domain; fixed after construction, except that a kBudgetUnknown (a capacity the
  // runtime could not tell before it was up) is read at the domain's first load.
  static constexpr int64_t kBudgetUnknown = -1;
  std::map<std::string, int64_t> budgets_;
  // Per memory domain (a device's models share its compute too); fixed after construction.
  std::map<std::string, std::unique_ptr<PriorityGate>> gates_;
  std::set<int> devices_;                   // device ids locked at start; fixed

  mutable std::shared_mutex models_mu_;
  ServerConfig config_;                               // guarded by models_mu_: what is served now
  Models models_;                                     // guarded by models_mu_
  std::vector<std::shared_ptr<Entry>> retiring_;      // guarded by models_mu_

  std::mutex order_mu_;
  std::vector<Entry*> load_order_;  // guarded by order_mu_; unloaded back to front

  // The loader thread: on-demand loads and changes of the served set, one at a time.
  void LoaderLoop(std::stop_token stop);
  // An on-demand load of `entry`, then the requests that waited for it.
  void LoadForWaiting(const std::shared_ptr<Entry>& entry);
  // The reaper thread, every 50 ms or when a model goes idle: answers requests still waiting
  // for a load at their deadline, unloads models idle past their keep_alive and retired ones
  // that finished their requests, and reloads when the watched files changed.
  void ReaperLoop(std::stop_token stop);
  // Counts `request` in flight on a ready `entry` (and sets `loaded`), or parks it for a load
  // (taking it), or says why it cannot be served. REQUIRES: models_mu_ held (shared).
  Status Admit(const std::shared_ptr<Entry>& entry, std::unique_ptr<InferRequest>& request,
               std::shared_ptr<LoadedModel>& loaded);
  // Submits a request to a loaded model (validation, scheduling parameters, accounting).
  void SubmitLoaded(std::shared_ptr<Entry> entry, std::shared_ptr<LoadedModel> loaded,
                    std::unique_ptr<InferRequest> request);
  // What the watched files look like now: the YAML's and each version folder's stamp.
  std::string WatchStamp() const;

  std::mutex loader_mu_;
  std::condition_variable_any loader_cv_;
  std::condition_variable_any reaper_cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by loader_mu_
  bool idle_check_ = false;                  // guarded by loader_mu_: a model just went idle
  std::atomic<bool> reload_pending_{false};  // a reload the file watch asked for is queued

  std::atomic<bool> accepting_{true};
  std::atomic<int64_t> in_flight_{0};
  std::mutex drain_mu_;
  std::condition_variable drained_;

  std::jthread loader_;  // last: stopped and joined first
  std::jthread reaper_;
};

}  // namespace mmserve
