// ModelVersion: one version of one served model and the state machine of its life. It owns its
// state and its lock: the registry routes requests to it, the service asks it to admit them,
// the lifecycle asks it to begin and finish loads, unloads and drains, and each call decides
// under the lock what the change means, or why it does not happen.
//
//   kUnloaded ──load──► kLoading ──ok──► kReady ──unload──► kUnloading ──► kUnloaded
//                          └──error──► kFailed          (idle or evicted) ──► kOnDemand
//                                                       (repository unload) ──► kHeld
//   kReady ──make room for another load──► kDraining ──evicted or unloaded──► kUnloading
//                                             └──still busy at the loader's deadline──► kReady
//   kOnDemand ──a request──► kLoadingOnDemand ──ok──► kReady
//                                └──error──► kFailed ──its waiters answered──► kBackingOff
//   kBackingOff ──a request after the back-off──► kLoadingOnDemand
//   kHeld / kFailed / kBackingOff / kOnDemand ──LoadModel──► kLoading
//   kUnloaded, kOnDemand, kFailed, kBackingOff, a queued kLoadingOnDemand ──repository
//   unload──► kHeld
//   kOnDemand, kBackingOff, a queued kLoadingOnDemand ──shutdown──► kUnloaded
//   a queued kLoadingOnDemand whose version retired ──► kOnDemand
//
// IsLegalTransition() holds exactly these 28 edges (model_version_test counts them).
//
// Requests to a kReady version are served; to kOnDemand (or kBackingOff past retry_at) start
// one load and wait for it, as do those arriving during kLoadingOnDemand (or to a kFailed one
// whose waiters are not answered yet: they get the same answer); every other state
// answers 503 with the reason. A kDraining version serves the requests it holds and parks new
// ones for its next load. Retirement is the registry's: a retired version takes no new
// requests whatever its state and unloads once the requests it holds are done.
#pragma once

#include <array>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "common/event_log.h"
#include "common/mutex.h"
#include "config/model_config.h"
#include "runtime/runtime_guard.h"
#include "scheduler/model_scheduler.h"

namespace mmserve {

// The state a frontend shows (the repository API's spelling): a view of VersionState.
// kUnavailable: loaded and not serving for now (a load failed, an open breaker, held);
// kFailed: loaded and given up on (its engine stopped restarting) until it is loaded again.
enum class ModelState { kNotLoaded, kLoading, kReady, kUnavailable, kFailed, kUnloading };
std::string_view ModelStateName(ModelState state);  // "READY", as the repository API spells it

enum class VersionState {
  kUnloaded,         // loads only when told: at start-up (load: startup) or through LoadModel
  kOnDemand,         // not loaded; its next request loads it
  kLoading,          // a load someone told is running; requests get 503
  kLoadingOnDemand,  // a load its requests started is queued or running; requests wait for it
  kReady,            // serves requests
  kDraining,         // loaded, being emptied for another model's load: new requests wait
  kFailed,           // its last load failed (reason kept); loads again only when told
  kBackingOff,       // a load its requests started failed: the first after retry_at loads again
  kUnloading,        // its workers stop and its memory is freed
  kHeld,             // unloaded through the repository API: 503 until LoadModel
};
std::string_view VersionStateName(VersionState state);
// Whether the state machine above has the edge `from` → `to`.
bool IsLegalTransition(VersionState from, VersionState to);
ModelState PublicState(VersionState state);

// What a loaded version holds. Declaration order is destruction order in reverse: the scheduler
// (workers and their instances) goes first, then the session, then the runtime lease.
struct LoadedModel {
  RuntimeLease lease;
  std::unique_ptr<Session> session;
  std::unique_ptr<ModelScheduler> scheduler;
};

// A version's requests over about the last minute: the counts now against a sample the
// lifecycle took 55-65 s before (or its oldest, for a version younger than that).
struct MinuteFigures {
  double seconds = 0;            // the window
  int64_t requests = 0;          // answered, successes and failures
  int64_t errors = 0;            // failed by the backend, expired or rejected
  double p50 = 0, p99 = 0;       // request latency, seconds (Histogram::Quantile)
  int64_t generated_tokens = 0;  // generators
};

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
  std::map<std::string, std::string> notes;  // ... and what it says in words
  std::map<std::string, Histogram> histograms;  // ... and its latency distributions
  int64_t context_length = 0;               // tokens per sequence (llama), while loaded
  std::optional<SchedulerStats> stats;      // once it has loaded: every load's counts
  bool loaded = false;  // a session and scheduler serve it now (stats' gauges are theirs)
  int64_t loads = 0;                        // loads started so far
  int64_t evictions = 0;                    // unloads to make room for another model
  std::chrono::nanoseconds last_load_time{0};  // how long the last successful load took
  int64_t in_flight = 0;                    // requests submitted and not yet answered
  Clock::time_point last_used;              // its latest request's admission (keep_alive)
  std::vector<int64_t> versions;            // every version the model serves, ascending
  std::map<std::string, int64_t> labels;    // the model's labels
  std::optional<Event> last_event;          // its latest load, unload, failure (and why)
  int64_t load_done_bytes = 0;              // while loading: how far it has read its file
  int64_t load_total_bytes = 0;             // ... of this many bytes (0: unknown)
  std::optional<MinuteFigures> last_minute;  // once a sample has been taken
};

class ModelVersion;

// What a request needs to know of the version that will serve it, taken once per request: the
// version (its config is immutable) and, once it has loaded, its signature.
struct ModelDescription {
  std::shared_ptr<ModelVersion> version;
  ModelSignature signature;  // empty until the version has loaded once
  const ModelConfig& config() const;
};

// How a request's wait for its version's load ended.
struct WaitEnd {
  enum class Kind { kRouteAnew, kServe, kFail };
  Kind kind = Kind::kRouteAnew;  // no load ran for it: where the routing sends it now
  std::shared_ptr<ModelVersion> version;  // kServe: serve it on this version ...
  std::shared_ptr<LoadedModel> loaded;    // ... there (counted in flight)
  Status error;                           // kFail: answer it this
};

// A request parked on a version until a load, with the request path's continuation: where it
// goes when its wait ends. The version and the lifecycle end waits and never call up into the
// service that parked it (as a request's `done` carries its answer back).
struct ParkedRequest {
  using Resume = std::function<void(std::unique_ptr<InferRequest>, WaitEnd)>;
  std::unique_ptr<InferRequest> request;
  Resume resume;
  void End(WaitEnd end) { resume(std::move(request), std::move(end)); }
};

class ModelVersion : public std::enable_shared_from_this<ModelVersion> {
 public:
  // `domain`: the memory its device draws from; `events` (may be null) hears its changes.
  ModelVersion(ModelConfig config, std::string domain, std::shared_ptr<EventLog> events = {});

  const ModelConfig& config() const { return config_; }
  const std::string& domain() const { return domain_; }
  const std::string& name() const { return config_.name; }
  int64_t version() const { return config_.version; }
  std::string VersionName() const;  // "embedder v2"
  // Queue bound and default timeout per priority level.
  const std::array<LevelPolicy, kMaxPriorityLevel + 1>& levels() const { return levels_; }

  // What Admit decided for one request.
  struct Admission {
    std::shared_ptr<LoadedModel> serve;  // serve it there now: counted in flight
    bool parked = false;      // it waits for a load (Admit took it)
    bool start_load = false;  // ... and was the first to: the caller queues the load
    Status rejected;          // answer it this; OK when it is served or parked
  };
  // Decides, under its lock, what becomes of `request` arriving at `now`: a ready version
  // serves it; one that loads on demand (or after its back-off) parks it until the load —
  // single flight, the first request starts it; every other state rejects it with the reason.
  // Takes `request` only when it parks it, with `make_resume()` (a ParkedRequest::Resume,
  // made only then); counts it toward the request rate either way.
  template <typename MakeResume>
  Admission Admit(std::unique_ptr<InferRequest>& request, Clock::time_point now,
                  MakeResume&& make_resume) {
    MutexLock lock(mu_);
    Admission a = AdmitLocked(now);
    if (a.parked) waiting_.push_back({std::move(request), make_resume()});
    return a;
  }

  // The requests waiting for a load, taken to end their waits (routed anew or answered).
  std::vector<ParkedRequest> TakeWaiting();
  // After the load its requests started (Lifecycle::QueueDemandLoad; `ran`: false when it was
  // called off): the requests that waited for it and how their waits end — served by the load
  // (counted in flight, each), answered with its error (the back-off starts: a request after
  // `retry_at` tries again), or, when no load ran, routed anew.
  struct Waiters {
    std::vector<ParkedRequest> requests;
    WaitEnd end;
  };
  Waiters TakeWaitersAfterLoad(bool ran, Clock::time_point retry_at);
  // Whether the load its requests started goes ahead now: it is still queued, the version is
  // still routed to, and `accepting` (the server is not stopping). A queued load that may not
  // go ahead is called off (back to kOnDemand); its requests are routed anew.
  bool DemandLoadGoesAhead(bool accepting);

  // Where its events go (null: nowhere); its scheduler's events (breaker, workers) go there too.
  const std::shared_ptr<EventLog>& events() const { return events_; }

  // Takes mu_, then carried_mu_: while loaded, its counts so far plus what earlier loads
  // carried; unloaded, the carried counts alone (a version's counters never go backwards).
  ModelInfo Snapshot() const;
  // Folds a retired load's final counts into what the version carries: its scheduler's
  // statistics and its session's counters (not the gauges) and histograms. Called by the
  // scheduler's on_retired; takes carried_mu_ only.
  void CarryRetired(const SchedulerStats& stats, const std::map<std::string, int64_t>& counters,
                    const std::map<std::string, Histogram>& histograms);
  // Takes a sample for last_minute when the newest is kSampleEvery old (the lifecycle's
  // reaper calls it every 50 ms). Takes mu_, carried_mu_ and minute_mu_, one at a time.
  static constexpr auto kSampleEvery = std::chrono::seconds(5);
  void SampleMinute();

  // ---- what the others read -------------------------------------------------------------
  // The state and what decides on it, read at once.
  struct View {
    VersionState state = VersionState::kUnloaded;
    std::string reason;  // why it is not ready, when it is not
    VersionState unloading_to = VersionState::kUnloaded;  // while kUnloading: where it ends
    int64_t in_flight = 0;                                // requests it serves now
    std::optional<Clock::time_point> retire_by;           // set once it is retired
  };
  View view() const;
  ModelSignature signature() const;  // kept from its last load: empty until it loaded once
  bool retired() const;              // the registry no longer routes to it
  // What the model holds now: the backend's own figure, else the heap's growth over its load,
  // else the estimate. An isolated model is charged at least its estimate (less the cache room
  // it gave back): what its worker holds is measured from outside, at most once a second, and
  // pages it shares with the server (the model file's) are not its own. 0 when not loaded.
  int64_t Footprint() const;
  // What a choice of whom to evict weighs, at `now` (the injected clock).
  struct Residency {
    int64_t held = 0;                   // Footprint()
    bool ready = false;                 // kReady (not draining, loading or unloading)
    int64_t in_flight = 0;
    bool retired = false;
    Clock::time_point ready_at;         // steady clock: when its last load finished
    std::chrono::nanoseconds last_load_time{0};
    double rate = 0;                    // requests per second, decayed over kRateWindow
    Clock::time_point last_used;        // its latest request (the injected clock)
  };
  static constexpr auto kRateWindow = std::chrono::seconds(10);
  Residency ResidencyAt(Clock::time_point now) const;
  // The latest deadline of the requests waiting for a load; none when none waits.
  std::optional<Clock::time_point> LatestWaitingDeadline() const;

  // ---- requests (the service) ------------------------------------------------------------
  // A request it served (Admit's `serve`, or Borrow) is done at `now`: whether none is in
  // flight any more (a drain waits for that).
  bool Release(Clock::time_point now);
  // The loaded model for a request that needs the session only (tokenize, metadata), counted
  // in flight like a served request (Release it); null when not loaded (kReady or kDraining).
  std::shared_ptr<LoadedModel> Borrow(Clock::time_point now);
  // The requests waiting for a load past their deadline (`steady_now`), taken to be answered.
  std::vector<ParkedRequest> TakeExpired(Clock::time_point steady_now);
  // Shutdown: nothing loads on request any more (to kUnloaded); the requests waiting for a
  // load, taken to be answered.
  std::vector<ParkedRequest> StopLoadingOnDemand();
  // The registry stops routing to it: it unloads once idle, or at `by` at the latest.
  void Retire(Clock::time_point by);
  void MarkUsed(Clock::time_point now);  // its keep-alive counts from `now`

  // ---- loads (the lifecycle's loader thread, one at a time) ------------------------------
  // A load begins: from kUnloaded, kOnDemand, kFailed, kBackingOff or kHeld to kLoading, or
  // the load its requests queued (kLoadingOnDemand stays, its reason cleared).
  void BeginLoad();
  void SetProgress(std::shared_ptr<const LoadProgress> progress);  // null once it ends
  void WaitForRoom(std::string why);  // the load gave way: its reason while it stays queued
  void FailLoad(const Status& error);  // to kFailed, with the error as its reason
  // What a successful load measured.
  struct LoadFacts {
    MemoryEstimate estimate;
    int64_t measured_bytes = 0;
    std::chrono::nanoseconds took{0};
    Clock::time_point ready_at;  // steady clock
    Clock::time_point now;       // the injected clock (its keep-alive starts)
  };
  // To kReady, serving through `loaded` (whose session gives the signature kept from now on).
  void FinishLoad(std::shared_ptr<LoadedModel> loaded, const LoadFacts& facts);

  // ---- room for other loads (the lifecycle) -----------------------------------------------
  // kReady to kDraining with `why`: the requests in flight then; none when it is not kReady.
  std::optional<int64_t> BeginDrain(std::string why);
  enum class DrainEnd { kDrained, kChanged, kTimedOut };
  // Waits until nothing is in flight (kDrained), it left kDraining (kChanged), or `until`.
  DrainEnd WaitDrained(Clock::time_point until);
  // A drain given up: kDraining back to kReady. Whether requests it held back wait (they go
  // through the routing again).
  bool EndDrain();
  // The loaded model (kReady or kDraining; else null), to ask for cache room; CountShed
  // charges what it gave to that load (not a later one).
  std::shared_ptr<LoadedModel> Current() const;
  void CountShed(const std::shared_ptr<LoadedModel>& from, int64_t bytes);

  // ---- unloads: Begin* takes what it holds (null: nothing to unload) and moves it to
  // kUnloading; the caller frees that without the lock, then calls FinishUnload. -----------
  // An unload to kUnloaded, or to kHeld (the repository API), which a version not loaded (or
  // already unloading) ends in as well.
  std::shared_ptr<LoadedModel> BeginUnload(VersionState to);
  // To kOnDemand when kReady, nothing is in flight and it has idled its keep_alive at `now`.
  std::shared_ptr<LoadedModel> BeginIdleUnload(Clock::time_point now);
  // To kOnDemand for another model's room, when loaded and nothing is in flight.
  std::shared_ptr<LoadedModel> BeginEviction();
  // From kUnloading to where it was aimed, with `reason` (an event of `kind`, else the state's
  // own). True when requests came meanwhile: they wait for a load the caller queues (when it
  // ended kOnDemand: now kLoadingOnDemand), or that load, called off, routes them anew.
  bool FinishUnload(std::string reason, std::string_view kind = {});

 private:
  Admission AdmitLocked(Clock::time_point now) REQUIRES(mu_);
  // Counts one request in flight on the loaded model at `now` and returns that model.
  std::shared_ptr<LoadedModel> UseLocked(Clock::time_point now) REQUIRES(mu_);
  // Moves to `to` with `reason` (why it is not ready; empty when it is), and records the change
  // as an event — of `kind`, else the one the new state implies ("loaded", "unloaded", ...).
  // Asserts the edge is legal.
  void TransitionLocked(VersionState to, std::string reason = {}, std::string_view kind = {})
      REQUIRES(mu_);
  std::shared_ptr<LoadedModel> BeginUnloadLocked(VersionState to) REQUIRES(mu_);
  int64_t FootprintLocked() const REQUIRES(mu_);
  // Its request rate: counts one request at `now`, or reads the rate at `now`.
  void CountRequestLocked(Clock::time_point now) REQUIRES(mu_);
  double RateLocked(Clock::time_point now) const REQUIRES(mu_);

  mutable Mutex mu_;
  VersionState state_ GUARDED_BY(mu_) = VersionState::kUnloaded;
  std::string reason_ GUARDED_BY(mu_);
  VersionState unloading_to_ GUARDED_BY(mu_) = VersionState::kUnloaded;
  MemoryEstimate estimate_ GUARDED_BY(mu_);
  int64_t measured_bytes_ GUARDED_BY(mu_) = 0;
  int64_t shed_bytes_ GUARDED_BY(mu_) = 0;  // cache room given back since its last load
  std::shared_ptr<LoadedModel> loaded_ GUARDED_BY(mu_);  // set exactly while kReady or kDraining
  ModelSignature signature_ GUARDED_BY(mu_);             // kept from its last load
  // Requests waiting for a load: in kLoadingOnDemand, kDraining, kUnloading to kOnDemand (and
  // kFailed until TakeWaitersAfterLoad answers them).
  std::vector<ParkedRequest> waiting_ GUARDED_BY(mu_);
  int64_t in_flight_ GUARDED_BY(mu_) = 0;
  // Notified when in_flight_ falls to 0 and at every state change: a drain waits on it.
  mutable std::condition_variable_any changed_;
  int64_t loads_ GUARDED_BY(mu_) = 0;
  int64_t evictions_ GUARDED_BY(mu_) = 0;
  std::chrono::nanoseconds last_load_time_ GUARDED_BY(mu_){0};
  Clock::time_point ready_at_ GUARDED_BY(mu_);  // steady clock: when its last load finished
  Clock::time_point last_used_ GUARDED_BY(mu_) = Clock::now();
  // While kBackingOff: requests get its load's error until then, and the first one after it
  // loads again.
  Clock::time_point retry_at_ GUARDED_BY(mu_);
  // Set when the registry stops routing to it: a routing decision that holds in every state.
  std::optional<Clock::time_point> retire_by_ GUARDED_BY(mu_);
  // While loading: how far the load has read (the status page's progress bar).
  std::shared_ptr<const LoadProgress> progress_ GUARDED_BY(mu_);
  std::optional<Event> last_event_ GUARDED_BY(mu_);

  struct Carried {
    SchedulerStats stats;
    std::map<std::string, int64_t> counters;
    std::map<std::string, Histogram> histograms;
  };
  mutable Mutex carried_mu_;  // after mu_, never before
  std::optional<Carried> carried_ GUARDED_BY(carried_mu_);
  struct MinuteSample {
    Clock::time_point at;
    Histogram requests;
    int64_t errors = 0;
    int64_t generated = 0;
  };
  static MinuteSample SampleOf(const ModelInfo& info, Clock::time_point at);
  std::optional<MinuteFigures> LastMinute(const ModelInfo& now_info) const;  // takes minute_mu_
  mutable Mutex minute_mu_;  // after mu_ and carried_mu_, never before
  std::deque<MinuteSample> minute_ GUARDED_BY(minute_mu_);  // oldest first, ~65 s of them
  double rate_ GUARDED_BY(mu_) = 0;  // requests per second at rate_at_
  Clock::time_point rate_at_ GUARDED_BY(mu_);

  const ModelConfig config_;
  const std::string domain_;
  const std::shared_ptr<EventLog> events_;
  const std::array<LevelPolicy, kMaxPriorityLevel + 1> levels_;
};

inline const ModelConfig& ModelDescription::config() const { return version->config(); }

}  // namespace mmserve
