// InferenceService: the in-process API every frontend calls. It owns the served models (one
// version each for now), loads them, validates requests against their signatures, queues them
// on their ModelScheduler and unloads everything in reverse load order at shutdown.
//
//   model state:   kNotLoaded ──load──► kLoading ──ok──► kReady ──shutdown / idle──► kUnloading ─► kNotLoaded
//                                            └──error──► kUnavailable (reason kept)
//
// Loading: `load: startup` models load in LoadStartupModels(); `load: on_demand` models (and
// models unloaded after `keep_alive` of idleness) load on their first request, on the loader
// thread, exactly once however many requests arrive meanwhile: those wait (bounded by their own
// deadlines) and are submitted when the load is done, or answered with its error. Requests to
// loaded models never wait on a load.
//
// Scheduling (priority levels, batching, breaker, watchdog) is the ModelScheduler's; the
// service applies the request's own `priority` and `timeout` parameters.
//
// Thread-safety: every public method may be called from any thread. Submit() never blocks on a
// device; the outcome arrives through the request's `done` callback, on a worker thread or on
// the caller's thread for requests rejected at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend_registry.h"
#include "service/job_store.h"
#include "config/model_config.h"
#include "runtime/runtime_guard.h"
#include "scheduler/model_scheduler.h"

namespace mmserve {

enum class ModelState { kNotLoaded, kLoading, kReady, kUnavailable, kUnloading };
std::string_view ModelStateName(ModelState state);  // "READY", as the repository API spells it

// A snapshot of one model for metadata, readiness and listings.
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
  int64_t in_flight = 0;                    // requests submitted and not yet answered
};

class InferenceService {
 public:
  // `backends` and `guard` are not owned and must outlive the service.
  InferenceService(ServerConfig config, const BackendRegistry& backends, RuntimeGuard& guard);
  ~InferenceService();  // unloads whatever is still loaded

  // Loads every `load: startup` model, in file order. A model that fails to load becomes
  // kUnavailable with the reason and the others carry on.
  void LoadStartupModels();

  bool Ready() const;  // every startup model is ready and the service accepts requests
  bool accepting() const { return accepting_.load(); }
  const ServerConfig& config() const { return config_; }

  // NotFound for an unknown model, or a version it does not serve (0 = the served version).
  Result<ModelInfo> GetModel(const std::string& name, int64_t version = 0) const;
  std::vector<ModelInfo> ListModels() const;
  // The version a request for `name` is served by (0 for an unknown model). Cheap: no copy.
  int64_t ServedVersion(const std::string& name) const;

  // Validates `request` against the model and queues it. Always takes ownership: the outcome,
  // including a rejection, is delivered through request->done exactly once.
  void Submit(std::unique_ptr<InferRequest> request);

  // Stops accepting, waits up to `drain_timeout` for requests in flight, then unloads every
  // model in reverse load order, logging one line per step. Idempotent.
  void Shutdown(std::chrono::milliseconds drain_timeout);

  int64_t in_flight() const { return in_flight_.load(); }
  JobStore& jobs() { return jobs_; }

 private:
  struct LoadedModel;
  struct Entry;

  Entry* FindEntry(const std::string& name) const;
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
  static ModelInfo Snapshot(const Entry& entry);

  const ServerConfig config_;
  const BackendRegistry& backends_;  // not owned
  RuntimeGuard& guard_;              // not owned

  JobStore jobs_;  // before entries_: outlives every model's callbacks
  std::map<std::string, int64_t> budgets_;  // per memory domain; fixed after construction
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // fixed after construction

  std::mutex order_mu_;
  std::vector<Entry*> load_order_;  // guarded by order_mu_; unloaded back to front

  // The loader thread: on-demand loads, one at a time, then the requests that waited.
  void LoaderLoop(std::stop_token stop);
  // The reaper thread, every 50 ms or when a model goes idle: answers requests still waiting
  // for a load at their deadline, and unloads models idle past their keep_alive.
  void ReaperLoop(std::stop_token stop);
  // Submits a request to a loaded model (validation, scheduling parameters, accounting).
  void SubmitLoaded(Entry& entry, std::shared_ptr<LoadedModel> loaded,
                    std::unique_ptr<InferRequest> request);

  std::mutex loader_mu_;
  std::condition_variable_any loader_cv_;
  std::condition_variable_any reaper_cv_;
  std::vector<Entry*> load_queue_;  // guarded by loader_mu_
  bool idle_check_ = false;         // guarded by loader_mu_: a model just went idle

  std::atomic<bool> accepting_{true};
  std::atomic<int64_t> in_flight_{0};
  std::mutex drain_mu_;
  std::condition_variable drained_;

  std::jthread loader_;  // last: stopped and joined first
  std::jthread reaper_;
};

}  // namespace mmserve
