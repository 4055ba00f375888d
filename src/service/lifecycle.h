// Lifecycle: moves model versions through their states (service/model_version.h) — load,
// unload, unload-if-idle, evict — within each memory domain's budget, and runs the two threads
// that change them while serving:
//
//   loader  a LoadQueue (service/load_queue.h): loads and changes of the served set, one at a
//           time, in the order posted;
//   reaper  every 50 ms, or when a version goes idle: answers requests that waited for a load
//           past their deadline, unloads versions idle past their keep_alive and retired ones
//           whose requests are done.
//
// Budgets: before a version loads, MakeRoom does what its Residency (service/residency.h) says
// until the estimate fits — evict a victim, drain a busy one and evict it, give way (the load
// is posted again for later and the loads queued behind it run), or fail with who holds what.
//
// Thread-safety: every public method may be called from any thread; loads run one at a time
// (start-up, then the loader thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend_registry.h"
#include "common/event_log.h"
#include "common/mutex.h"
#include "runtime/runtime_guard.h"
#include "scheduler/priority_gate.h"
#include "service/load_queue.h"
#include "service/model_registry.h"
#include "service/residency.h"

namespace mmserve {

class Lifecycle {
 public:
  // How long a failed on-demand load is not retried: requests meanwhile get its error at once.
  static constexpr auto kLoadRetryBackoff = std::chrono::seconds(5);

  // Budgets and priority gates for the domains of `config`'s models. `backends`, `guard` and
  // `registry` are not owned and must outlive the lifecycle.
  Lifecycle(const ServerConfig& config, const BackendRegistry& backends, RuntimeGuard& guard,
            ModelRegistry& registry, const TimeSource& time);
  ~Lifecycle();  // stops the threads

  std::shared_ptr<ModelVersion> NewVersion(const ModelConfig& config) const;
  // A device or memory domain the server did not lock or budget at start: what is wrong.
  Status CheckPlacement(const ModelConfig& config) const;

  void Start();  // starts the loader and reaper threads
  // Runs `task` on the loader thread, after those posted before it.
  void Post(std::function<void()> task) { loads_.Post(std::move(task)); }
  // The same, not before `when` (steady clock): tasks posted after it may run first.
  void PostAt(Clock::time_point when, std::function<void()> task) {
    loads_.PostAt(when, std::move(task));
  }
  // Stops both threads; tasks still queued run then (each answers "shutting down").
  void Stop();

  // Queues the load that the requests parked on `version` wait for (it is kLoadingOnDemand:
  // ModelVersion::Admit said start_load, or an unload or a drain left requests waiting). On the
  // loader thread it loads, giving way to the loads behind it while it waits for room, then
  // ends the requests' waits: served, answered with its error, or — when it was called off
  // (retired, stopping) — routed anew.
  void QueueDemandLoad(std::shared_ptr<ModelVersion> version);

  // Loads `version` from kUnloaded, kOnDemand, kFailed or kHeld (kLoading), or the load its
  // requests queued (kLoadingOnDemand); it ends kReady or kFailed. With `give_way` (a load its
  // requests queued), a load that would wait for a victim's minimum residency returns at once
  // instead, with the time to try again, `version` still kLoadingOnDemand and nothing freed:
  // the caller posts it again for then (PostAt), and the loads queued behind it go first.
  std::optional<Clock::time_point> Load(ModelVersion& version, bool give_way = false);
  // Loads every version of `versions` not loaded (with `startup_only`, only `load: startup`
  // ones); the first failure.
  Status LoadAll(const VersionMap& versions, bool startup_only);
  // Unloads a loaded version to `to`: kUnloaded, or kHeld (the repository API), which a version
  // not loaded (or unloading) moves to as well.
  void Unload(ModelVersion& version, VersionState to = VersionState::kUnloaded);
  // Unloads `version` to kOnDemand if nothing is in flight and it has been idle for its
  // keep_alive at `now`.
  void UnloadIfIdle(ModelVersion& version, Clock::time_point now);
  // Shutdown: every version stops loading on request; then those loaded unload, in reverse
  // load order, one log line each.
  void UnloadAll();
  // Wakes the reaper now (a version went idle, or one retired).
  void WakeReaper();

  // Every memory domain of the models served at start, with what its loaded versions hold.
  std::vector<DomainUsage> Domains() const { return residency_.Domains(); }
  // What happened to the versions this lifecycle made (loads, unloads, breaker trips, ...).
  EventLog& events() const { return *events_; }

 private:
  // A load that gave way: when to look again, and what it waits for (the version's reason).
  struct GiveWay {
    Clock::time_point until;
    std::string why;
  };
  // Before `loading` loads `bytes` more: evicts until they fit, or what is needed and held.
  // With `give_way`, a wait for a victim's minimum residency returns OK at once with
  // *give_way set, and nothing freed.
  Status MakeRoom(const ModelVersion& loading, int64_t bytes,
                  std::optional<GiveWay>* give_way = nullptr);
  // Load's second half, with room made: loads the session into `loaded` (which holds the
  // runtime lease) and makes `version` kReady; an error leaves the state to the caller.
  Status FinishLoad(ModelVersion& version, Backend& backend, std::shared_ptr<LoadedModel> loaded,
                    const MemoryEstimate& estimate);
  // Evicts the victim Residency named, for the reason it gave; false as Evict.
  bool EvictFor(const Residency::Step& step);
  // Ends a drain that did not lead to an eviction: the requests it held back are routed again.
  void Undrain(ModelVersion& victim);
  // Evicts an idle `version` (to kOnDemand) with `why`; false if a request arrived meanwhile.
  bool Evict(ModelVersion& version, std::string why);
  // The unload's second half, without locks: frees what `version` held and moves it from
  // kUnloading to the state it was unloading to, with `reason` (an event of `kind`, else the
  // state's own).
  void FinishUnload(ModelVersion& version, std::shared_ptr<LoadedModel> loaded,
                    std::string reason, std::string_view kind = {});
  void LoadForWaiting(const std::shared_ptr<ModelVersion>& version);
  void ReaperLoop(std::stop_token stop);
  void Reap(Clock::time_point now);

  const BackendRegistry& backends_;  // not owned
  RuntimeGuard& guard_;              // not owned
  ModelRegistry& registry_;          // not owned
  const TimeSource& time_;           // not owned: keep-alive is decided by it
  // Per memory domain (a device's models share its compute too); fixed after construction.
  std::map<std::string, std::unique_ptr<PriorityGate>> gates_;
  std::set<int> devices_;  // device ids locked at start; fixed
  // Shared with every version made here, which may outlive the lifecycle.
  const std::shared_ptr<EventLog> events_ = std::make_shared<EventLog>();
  Residency residency_;  // after events_, which it records cache sheds in

  Mutex order_mu_;
  std::vector<ModelVersion*> load_order_ GUARDED_BY(order_mu_);  // unloaded back to front

  std::atomic<bool> stopping_{false};  // Stop() began: queued demand loads are called off
  Mutex mu_;
  std::condition_variable_any reaper_cv_;
  bool wake_reaper_ GUARDED_BY(mu_) = false;

  LoadQueue loads_;  // last: stopped first (Stop stops the reaper, then the loads)
  std::jthread reaper_;
};

}  // namespace mmserve
