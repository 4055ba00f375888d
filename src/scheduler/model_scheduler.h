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
// Parts, each its own class: RequestQueue (request_queue.h), the one finish path (Finisher,
// finisher.h), the workers — BatchWorker and InlineWorker (batch_worker.h), ContinuousWorker
// (continuous_worker.h) — and the Watchdog (watchdog.h), over the state they share under one
// lock (SchedulerState, worker.h).
//
// Threads: `thread_num` workers and one watchdog, started by Create() and joined by the
// destructor (neither in inline mode). Enqueue() is thread-safe and never blocks on a device.
// A worker is the only thread that touches its instance (except Instance::Abort()).
#pragma once

#include <sys/types.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
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

class Finisher;
class InlineWorker;
class Watchdog;
class Worker;
struct SchedulerState;

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
  ModelScheduler(Options options, Session& session);

  const Options options_;
  Session& session_;  // not owned
  CircuitBreaker breaker_;
  // The one finish path, the state the threads share, and the threads (last: stopped and
  // joined by the destructor before the members above go).
  std::unique_ptr<Finisher> finisher_;
  std::unique_ptr<SchedulerState> state_;
  std::unique_ptr<InlineWorker> inline_;  // inline mode
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace mmserve
