// InferenceService: the in-process API every frontend calls, and the request path's front
// door: it admits a request (routing, the version's state, the in-flight count), checks it
// against the version's signature and queues it on that version's ModelScheduler. The parts it
// composes:
//
//   service/model_registry.h  the served set: models, versions, labels, canary; routing
//   service/model_version.h   one version and the state machine of its life
//   service/lifecycle.h       loads, unloads, eviction within budgets; loader and reaper threads
//   service/config_source.h   the YAML file, repository API entries, and the file watch
//   service/served_set.h      reload, repository load/unload: diff, load, publish, retire
//   service/job_store.h       asynchronous jobs
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
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend_registry.h"
#include "config/model_config.h"
#include "runtime/runtime_guard.h"
#include "service/config_source.h"
#include "service/job_store.h"
#include "service/lifecycle.h"
#include "service/model_registry.h"
#include "service/model_version.h"
#include "service/served_set.h"

namespace mmserve {

class InferenceService {
 public:
  // `backends`, `guard` and `time` are not owned and must outlive the service. `time` decides
  // keep-alive, load back-off, retirement and job expiry (tests pass a FakeTime).
  InferenceService(ServerConfig config, const BackendRegistry& backends, RuntimeGuard& guard,
                   const TimeSource& time = TimeSource::Real());
  ~InferenceService();  // unloads whatever is still loaded

  // Loads every `load: startup` version, in file order. A version that fails to load becomes
  // unavailable with the reason and the others carry on.
  void LoadStartupModels();

  bool Ready() const;  // every startup model is ready and the service accepts requests
  bool accepting() const { return accepting_.load(); }

  // NotFound for an unknown model, version or label. Neither version nor label: the version an
  // unversioned request is served by when no canary draws it (stable, else the highest).
  Result<ModelInfo> GetModel(const std::string& name, int64_t version = 0,
                             const std::string& label = {}) const;
  // Every version of every model, in file order (models added through LoadModel last).
  std::vector<ModelInfo> ListModels() const;
  // The names of the models serving `task` (file order), without snapshotting their state.
  std::vector<std::string> ModelsServing(const std::string& task) const {
    return registry_.NamesServing(task);
  }
  // The version a request for `ref` goes to (the canary drawn with `request_id`), its config
  // and signature, without a snapshot of its state. A frontend that checks a request against
  // it submits the request pinned to that version (model_version), so both see one version.
  Result<ModelDescription> Describe(const ModelRef& ref, const std::string& request_id = {}) const;

  // Routes `request` to a version, validates it against that version and queues it. Always
  // takes ownership: the outcome, including a rejection, is delivered through request->done
  // exactly once, with InferResponse::model_version set to the version that served it.
  void Submit(std::unique_ptr<InferRequest> request);
  // Submits `request` to the version `target` describes (routed anew only if that version
  // retired since), so that what the frontend checked against it holds.
  void Submit(const ModelDescription& target, std::unique_ptr<InferRequest> request);

  // Runs `f` on the loaded session of the version `ref` routes to, counted in flight so that
  // it cannot unload meanwhile: for what needs no queue (a tokenizer, microseconds). Unavailable
  // when that version is not loaded.
  Status WithSession(const ModelRef& ref, const std::function<Status(const Session&)>& f);

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
  // Each memory domain's budget and what is held of it now.
  std::vector<DomainUsage> Devices() const { return lifecycle_.Domains(); }
  // Loads, unloads, evictions, breaker trips, worker restarts, reloads: the recent ones.
  const EventLog& events() const { return lifecycle_.events(); }

 private:
  class InFlight;

  // The front door: the access log's wrapper, the scheduling parameters, then Route.
  void SubmitTo(const std::shared_ptr<ModelVersion>& pinned,
                std::unique_ptr<InferRequest> request);
  // Routes a request that passed the front door — once, or again after it waited for a version
  // that was retired or did not load — and admits it there.
  void Route(const std::shared_ptr<ModelVersion>& pinned, std::unique_ptr<InferRequest> request);

  // Counts `request` in flight on a ready `version` (and sets `loaded`), or parks it for a load
  // (taking it), or says why it cannot be served. Called with the registry's lock held.
  // `asked`: the version the client named (0: none), for routing it anew after a wait.
  Status Admit(const std::shared_ptr<ModelVersion>& version, int64_t asked,
               std::unique_ptr<InferRequest>& request, std::shared_ptr<LoadedModel>& loaded);
  // Where a parked request goes when its wait ends: served, answered, or routed anew.
  ParkedRequest::Resume ResumeAfterWait(int64_t asked);
  // Submits a request to a loaded version that already counts it in flight (validation,
  // accounting, the answer's version stamp).
  void SubmitLoaded(std::shared_ptr<ModelVersion> version, std::shared_ptr<LoadedModel> loaded,
                    std::unique_ptr<InferRequest> request);
  // The config watch's: a reload because the watched files changed; `done` once it ended.
  void ReloadChanged(std::function<void()> done);

  const TimeSource& time_;  // not owned

  JobStore jobs_;  // before the models: outlives every model's callbacks
  ModelRegistry registry_;
  Lifecycle lifecycle_;  // its threads stop in Shutdown
  ServedSetChanges changes_;  // the loader thread's
  ConfigWatch watch_;  // its own thread; stopped in Shutdown, before the lifecycle

  std::atomic<bool> accepting_{true};
  std::atomic<int64_t> in_flight_{0};
  std::mutex drain_mu_;
  std::condition_variable drained_;
};

}  // namespace mmserve
