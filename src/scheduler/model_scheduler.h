// ModelScheduler: the queues, batcher, worker threads, circuit breaker and hang watchdog of one
// loaded model.
//
//   Enqueue ─► breaker admits? ──no──► 503 at once
//                 │ yes
//                 ▼
//   priority queues, level 1 (highest) .. 9, FIFO within a level, bounded per level (full → 429)
//                 │  a worker takes the highest levels first, up to max_batch, waiting up to
//                 │  max_queue_delay for a partial batch; expired → 504, cancelled → dropped,
//                 ▼  neither executed
//   worker i ── its own Instance ── Execute(batch at the smallest tier that holds it)
//                 │
//                 ▼
//   Finish: breaker outcome (success, failure, timeout or neutral), statistics,
//           (preserve_ordering: responses leave in arrival order)
//
// Deadlines are kept to the millisecond: the watchdog thread wakes at the next deadline and
// answers 504 then — a queued request (never executed, neutral for the breaker) or an executing
// one (its execution goes on; the late result is discarded; a timeout for the breaker, like
// an execution that returns after its deadline). It also reports an execution still running
// `watchdog_margin` past its deadline once — model, version, batch size, stage, elapsed time —
// opens the breaker and aborts the instance, which the worker then replaces. A continuous
// (generation) sequence is answered at its deadline too, even while a step runs: its partial
// answers are closed first (none follows the 504), and the instance, whose next on_partial is
// refused, ends the sequence; its own late end is discarded.
//
// Across models: with a PriorityGate (one per device), the model's priority is its level there;
// while a more important model on the device is busy, the workers start nothing and an
// execution in progress pauses at the engine's yield points (at most until its latest
// deadline; paused time does not count toward a hang).
//
// Inline execution (`execute_inline`): for a session whose executions never block and whose
// instance any thread may run (Session::executes_inline), Enqueue() runs the request at once on
// the calling thread — no queue, no worker, no thread crossing (TF Serving's way without a
// batcher). The breaker, deadlines, cancellation, ordering and statistics still apply; there
// is nothing to batch, prioritize, pin or watch for hangs.
//
// Time: whatever the scheduler decides by time — deadlines, batch windows, parking, the
// breaker's cool-down, hang reports — it reads from Options::time, and its timed waits go
// through it too: tests pass a FakeTime and move it instead of sleeping.
//
// Threads: `thread_num` workers and one watchdog, started by Create() and joined by the
// destructor (neither in inline mode). Enqueue() is thread-safe and never blocks on a device.
// A worker is the only thread that touches its instance (except Instance::Abort()).
#pragma once

#include <sys/types.h>

#include <array>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "common/clock.h"
#include "common/histogram.h"
#include "common/mutex.h"
#include "common/result.h"
#include "config/model_config.h"
#include "scheduler/circuit_breaker.h"
#include "scheduler/priority_gate.h"

namespace mmserve {

// What one worker thread is, read back from the thread itself.
struct WorkerInfo {
  int index = 0;
  pid_t tid = 0;
  std::vector<int> cores;  // its CPU affinity after pinning
  int nice = 0;            // its nice value (lower = more CPU under contention)
  int64_t restarts = 0;    // instances replaced after a watchdog report
};

struct BatchStats {
  int64_t executions = 0;
  int64_t compute_ns = 0;
};

struct SchedulerStats {
  int64_t success = 0;
  int64_t failure = 0;          // the backend failed, or the execution timed out
  int64_t rejected = 0;         // never queued: queue full, breaker open, shutting down
  int64_t expired = 0;          // deadline passed while queued (never executed)
  int64_t cancelled = 0;        // the client went away while queued
  int64_t inference_count = 0;  // requests executed
  int64_t execution_count = 0;  // batches executed
  int64_t success_ns = 0;       // summed over successes: enqueue → answer (Triton's success.ns)
  int64_t fail_ns = 0;          // summed over failures and expiries: enqueue → answer
  std::map<int, BatchStats> batches;  // by executed batch size (tier)
  // Distributions: every answered request (enqueue → answer), and the executed ones' queue time
  // (enqueue → execution start) and compute time (execution start → end); their sum_ns are
  // Triton's cumulative queue and compute durations.
  Histogram request_latency;
  Histogram queue_latency;
  Histogram compute_latency;
  std::array<int64_t, kMaxPriorityLevel + 1> queued{};  // by level (index 0 unused)
  int64_t executing = 0;
  CircuitBreaker::State breaker = CircuitBreaker::State::kClosed;
  std::string breaker_reason;
  int64_t breaker_opened = 0;
  int64_t watchdog_reports = 0;
  int64_t yields = 0;    // times a worker gave way to a more important model (PriorityGate)
  int64_t yield_ns = 0;  // ... and how long, summed
  std::vector<WorkerInfo> workers;
};

// Adds `more`'s counts (requests, durations, batches, latency histograms, breaker openings,
// watchdog reports, yields) to `into`; the gauges (queued, executing, breaker state, workers)
// stay `into`'s.
void AddCounts(SchedulerStats& into, const SchedulerStats& more);

// The priority level a request runs at: its own when it names one (1..kMaxPriorityLevel),
// else the model's `default_level`.
int LevelOf(const InferRequest& request, int default_level);
// Its deadline at `level`: the one it asked for, bounded by the level's timeout from its
// arrival. The service applies it at admission (the deadline holds while a request waits for a
// load) and the scheduler again at Enqueue (for callers that skip the service).
Clock::time_point DeadlineFor(const InferRequest& request,
                              const std::array<LevelPolicy, kMaxPriorityLevel + 1>& levels,
                              int level);

class ModelScheduler {
 public:
  struct Options {
    std::string model;  // for logs and errors
    int64_t version = 1;
    int thread_num = 1;
    int max_batch = 1;
    // Allowed batch sizes, ascending, the largest >= max_batch; empty = any size.
    std::vector<int> batch_tiers;
    // A worker with fewer than max_batch requests queued waits up to this long (from the oldest
    // request's arrival) for the batch to fill.
    std::chrono::milliseconds max_queue_delay{0};
    // A worker that would take fewer than max_batch requests while another worker's batch is
    // executing waits until the batch fills or that execution ends (Session::
    // executions_share_device: a serial device would only queue the partial batch behind it).
    bool hold_partial_batches = false;
    bool preserve_ordering = false;
    int default_priority = kDefaultPriority;  // the level of requests that name none
    // Per level (index 1..kMaxPriorityLevel): queue bound and default timeout.
    std::array<LevelPolicy, kMaxPriorityLevel + 1> levels{};
    CircuitBreaker::Options breaker;
    std::chrono::milliseconds watchdog_margin{1'000};
    std::vector<int> cpu_affinity;  // cores the workers are pinned to; empty = any
    int nice = 0;                   // nice value of the workers (0 = unchanged)
    // The device's gate, where default_priority is this model's level; not owned, outlives the
    // scheduler. Null: never gives way.
    PriorityGate* gate = nullptr;
    // Run each request on the thread that enqueues it (see above). REQUIRES: the session
    // executes_inline(), max_batch 1.
    bool execute_inline = false;
    // Hears what the status page lists as events: "breaker_open" / "breaker_half_open" /
    // "breaker_closed" and "worker_restarted", with what happened. Any thread; may be empty.
    std::function<void(std::string kind, std::string message)> on_event;
    // Called once, at the end of the destructor (every worker joined, every request
    // answered), with the final statistics: what a version carries across its loads.
    std::function<void(const SchedulerStats& final_stats)> on_retired;
    // Warm-up: each instance runs this many executions at every batch tier (or at 1 when any
    // size runs) before Create() returns; a failure fails the load.
    int warmup = 0;
    // What deadlines, batch windows, parking and the watchdog go by (tests: a FakeTime); not
    // owned, outlives the scheduler. The gate keeps its own.
    const TimeSource* time = &TimeSource::Real();
  };

  // Every level with `max_size` and `timeout`, except those `queue` overrides.
  static std::array<LevelPolicy, kMaxPriorityLevel + 1> Levels(
      const QueueConfig& queue, std::chrono::milliseconds timeout);

  // Starts the workers and waits until each has created its Instance; fails (with every
  // worker stopped) if any instance cannot be created. `session` is not owned and must outlive
  // the scheduler.
  static Result<std::unique_ptr<ModelScheduler>> Create(Options options, Session& session);
  ~ModelScheduler();  // stops, answers anything still queued with Unavailable, joins

  // Always takes ownership of `request`, and bounds its deadline by its level's timeout. If
  // the breaker is open, the level's queue is full or the scheduler is stopping, completes the
  // request with Unavailable / ResourceExhausted and returns that status too. In inline mode
  // the request has been executed and answered when it returns.
  Status Enqueue(std::unique_ptr<InferRequest> request);

  // Stops accepting; workers still finish what is queued. Returns at once.
  void StopAccepting();

  int64_t queued() const;
  int64_t executing() const;
  SchedulerStats stats() const;
  CircuitBreaker::State breaker_state() const { return breaker_.state(); }
  std::string breaker_reason() const { return breaker_.reason(); }

 private:
  struct Ledger;
  struct Pending;
  struct Running;
  struct Answer;
  class Yielder;

  ModelScheduler(Options options, Session& session);
  void WorkerLoop(std::stop_token stop, int index);
  void BatchLoop(std::stop_token stop, int index, std::unique_ptr<Instance> instance);
  // Whether a worker other than `index` is executing a batch now.
  bool AnotherBatchExecuting(int index) const REQUIRES(mu_);
  // Before worker `index` takes a batch: waits up to max_queue_delay for a partial batch to
  // fill and, with hold_partial_batches, while another worker's batch executes. False when
  // nothing is left to take (another worker took it) or the scheduler stops. `lock` holds mu_.
  bool WaitForBatch(MutexLock& lock, std::stop_token stop, int index) REQUIRES(mu_);
  void ContinuousLoop(std::stop_token stop, int index, std::unique_ptr<Instance> instance);
  void WatchdogLoop(std::stop_token stop);
  // The watchdog's parts, under mu_: when to wake next; queued requests that expired or were
  // cancelled, and executing ones past their deadline (answered now, the result discarded);
  // executions past deadline + margin (reported, breaker tripped, instance aborted).
  Clock::time_point NextWatch(Clock::time_point now) const REQUIRES(mu_);
  void CollectDead(Clock::time_point now, std::vector<Answer>& answers) REQUIRES(mu_);
  void CollectHung(Clock::time_point now, std::vector<Answer>& answers) REQUIRES(mu_);
  // 504 for a request whose execution ran past its deadline; counted as a timeout.
  Status Overrun(const Pending& p, Clock::time_point now) const;
  // Pops up to `n` live requests, highest level first; expired and cancelled ones met on the
  // way are moved to `dead` with their outcome.
  std::vector<std::unique_ptr<Pending>> TakeRequests(
      size_t n, std::vector<std::pair<std::unique_ptr<Pending>, Status>>& dead) REQUIRES(mu_);
  // Expired (504) or cancelled, else OK: a request at `now`, queued or about to run.
  Status DeadOutcome(const Pending& p, Clock::time_point now) const;
  int TierFor(size_t n) const;
  // The one way a queued request leaves: statistics, breaker, then its callback.
  // `breaker`: false when another request already told the breaker this outcome (a failure
  // the requests of one execution call share counts once).
  void Finish(const Ledger& ledger, InferCallback done, Result<InferResponse> result,
              bool breaker = true);
  void Deliver(uint64_t seq, InferCallback done, Result<InferResponse> result);
  // Statistics of one execution of a batch (its requests, its tier, its compute time).
  void CountExecution(const Execution& execution, Clock::duration took);
  // `items` as the batches of at most `max_batch` one call executes (see Instance::ExecuteEach).
  std::vector<Execution> SplitIntoBatches(BatchView items, size_t max_batch) const;
  // Answers the requests of one executed call (`batch`, split by `max_batch` into the batches
  // `statuses` are of) whose callbacks the watchdog left in `dones`.
  void AnswerCall(const std::vector<std::unique_ptr<Pending>>& batch,
                  std::vector<InferCallback>& dones, std::vector<BatchItem>& items,
                  const std::vector<Status>& statuses, size_t max_batch, Clock::time_point end);
  void OnContinuousDone(int worker, Pending* p, Result<InferResponse> result);
  // Inline mode: executes `p` (admitted, counted executing) on this thread and finishes it.
  void ExecuteInline(std::unique_ptr<Pending> p);
  std::unique_ptr<Instance> Restart(int index, std::unique_ptr<Instance> instance);
  // Runs options_.warmup executions per tier on `instance` (its own thread).
  Status Warmup(Instance& instance);
  // Waits until `has_work` (`lock` holds mu_), parking `instance` once it has waited
  // kParkAfter, releasing it after its release_after(); false when stopped.
  template <typename Pred>
  bool WaitForWork(MutexLock& lock, std::stop_token stop, Instance& instance, Pred has_work)
      REQUIRES(mu_);
  // True while the gate says a more important model on the device has work.
  bool MustGiveWay() const;
  // Waits while MustGiveWay(): before a worker takes a batch, and (through worker `index`'s
  // Yielder) at the engine's yield points inside an execution.
  void GiveWay(int index, std::stop_token stop);
  Clock::time_point Now() const { return options_.time->Now(); }
  // Worker `w`'s entries of running_ and active_. The vectors are sized in the constructor and
  // never resized, so a worker may keep the reference; what it refers to is guarded by mu_.
  Running& RunningSlot(int w) NO_THREAD_SAFETY_ANALYSIS;
  std::map<Pending*, std::unique_ptr<Pending>>& ActiveSlot(int w) NO_THREAD_SAFETY_ANALYSIS;

  const Options options_;
  Session& session_;  // not owned
  CircuitBreaker breaker_;

  mutable Mutex mu_;
  std::condition_variable_any cv_;        // workers: work queued, or slots freed
  std::condition_variable_any watch_cv_;  // watchdog: stop
  std::array<std::deque<std::unique_ptr<Pending>>, kMaxPriorityLevel + 1> queues_ GUARDED_BY(mu_);
  int64_t queued_ GUARDED_BY(mu_) = 0;  // the sum of the queues' sizes
  bool accepting_ GUARDED_BY(mu_) = true;
  int64_t executing_ GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  Clock::time_point watch_next_ GUARDED_BY(mu_);  // when the watchdog wakes next
  // How late a batch window's timed wait has been waking (a moving average); the next window's
  // wait ends that much early, so that it closes when configured.
  Clock::duration window_lag_ GUARDED_BY(mu_){0};
  bool watch_kick_ GUARDED_BY(mu_) = false;  // an earlier deadline came; wake now
  int instances_ready_ GUARDED_BY(mu_) = 0;
  Status instance_error_ GUARDED_BY(mu_);
  // One per worker. Sized once in the constructor: a worker keeps a reference to its own.
  std::vector<Running> running_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Yielder>> yielders_;  // one per worker, set before it starts
  std::unique_ptr<Instance> inline_instance_;  // inline mode: run by every calling thread
  // Requests admitted into a continuous instance, per worker.
  std::vector<std::map<Pending*, std::unique_ptr<Pending>>> active_ GUARDED_BY(mu_);

  mutable Mutex stats_mu_;
  SchedulerStats stats_ GUARDED_BY(stats_mu_);  // queued/executing/breaker filled on read

  Mutex order_mu_;  // preserve_ordering: responses held until their turn
  uint64_t next_deliver_ GUARDED_BY(order_mu_) = 0;
  std::map<uint64_t, std::pair<InferCallback, Result<InferResponse>>> held_ GUARDED_BY(order_mu_);

  // Last: joined before the members above are destroyed.
  std::jthread watchdog_;
  std::vector<std::jthread> workers_;
};

}  // namespace mmserve
