// What the scheduler's threads share, and what its two kinds of worker thread have in common.
//
// SchedulerState: one lock over the request queue, each worker's slot (what it executes now,
// which the watchdog watches) and the count executing; the condition variables the workers and
// the watchdog wait on. Internal to scheduler/; every guarded field is checked by clang's
// -Wthread-safety.
//
// Worker: one thread with its own Instance. It pins itself, creates and warms its instance,
// then runs its style's loop (BatchWorker, ContinuousWorker). Between requests it parks an
// idle instance; before and inside an execution it gives way to a more important model at the
// PriorityGate (it is the instance's YieldPoint); after a watchdog report it replaces the
// aborted instance.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "scheduler/finisher.h"
#include "scheduler/model_scheduler.h"
#include "scheduler/request_queue.h"

namespace mmserve {

// What a worker is executing now, for the watchdog.
struct Running {
  bool active = false;
  bool reported = false;
  Clock::time_point start;               // the execution's (continuous: its oldest sequence's)
  Clock::time_point deadline;            // the latest deadline of the requests it serves
  std::vector<Pending*> pendings;        // batch style; continuous: WorkerSlot::active
  const Execution* execution = nullptr;  // batch style: its stage
  int batch = 0;
  Instance* instance = nullptr;
  bool paused = false;            // giving way at the PriorityGate now
  Clock::duration paused_for{0};  // summed; the watchdog adds it to the deadline
};

struct WorkerSlot {
  Running running;
  // Continuous: the requests admitted into the instance, owned here until it ends them.
  std::map<Pending*, std::unique_ptr<Pending>> active;
};

struct SchedulerState {
  SchedulerState(const ModelScheduler::Options& options, Session& session,
                 CircuitBreaker& breaker, Finisher& finisher)
      : options(options), session(session), breaker(breaker), finisher(finisher),
        queue(options.model, options.levels),
        slots(static_cast<size_t>(options.thread_num)) {}

  Clock::time_point Now() const { return options.time->Now(); }

  const ModelScheduler::Options& options;
  Session& session;
  CircuitBreaker& breaker;
  Finisher& finisher;

  Mutex mu;
  std::condition_variable_any cv;        // workers: work queued, a slot freed, a batch ended
  std::condition_variable_any watch_cv;  // the watchdog: an earlier deadline, or stop
  RequestQueue queue GUARDED_BY(mu);
  int64_t executing GUARDED_BY(mu) = 0;
  std::vector<WorkerSlot> slots GUARDED_BY(mu);  // one per worker, sized once
  Clock::time_point watch_next GUARDED_BY(mu);   // when the watchdog wakes next
  bool watch_kick GUARDED_BY(mu) = false;        // an earlier deadline came: wake now
  int instances_ready GUARDED_BY(mu) = 0;
  Status instance_error GUARDED_BY(mu);
};

// Runs `f` with `lock` let go and takes it back afterwards, also when `f` throws (the lock
// knows it let go: its destructor does not unlock twice). The analysis cannot see which mutex
// a MutexLock passed by reference holds, hence the escape; `f` must not touch guarded state.
template <typename F>
void WithLockReleased(MutexLock& lock, F&& f) NO_THREAD_SAFETY_ANALYSIS {
  struct Retake {
    MutexLock& lock;
    ~Retake() NO_THREAD_SAFETY_ANALYSIS { lock.lock(); }
  };
  lock.unlock();
  Retake retake{lock};
  f();
}

// Runs options.warmup executions at every batch tier (or at 1 when any size runs) on
// `instance`, on the calling thread; the first failure fails it.
Status Warmup(const ModelScheduler::Options& options, Session& session, Instance& instance);

class Worker : public YieldPoint {
 public:
  Worker(SchedulerState& s, int index) : s_(s), index_(index) {}
  // Joins. The owner calls Join() first: by the time this runs, the derived worker's members
  // are gone.
  ~Worker() override;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Starts the thread; it reports its instance ready (or failed) through the state.
  void Start();
  void RequestStop() { thread_.request_stop(); }
  void Join();

  // YieldPoint: what the instance calls between its steps.
  bool MayYield() const override;
  bool ShouldYield() const override { return MustGiveWay(); }
  void Yield() override { GiveWay(stop_); }

 protected:
  // The style's loop, until `stop` (or the instance cannot be replaced).
  virtual void Loop(std::stop_token stop, std::unique_ptr<Instance> instance) = 0;

  // Waits until `has_work` (`lock` holds s_.mu), parking `instance` once it has waited
  // kParkAfter and releasing it after its release_after(); false when stopped.
  template <typename Pred>
  bool WaitForWork(MutexLock& lock, std::stop_token stop, Instance& instance, Pred has_work)
      REQUIRES(s_.mu);
  // True while the gate says a more important model on the device has work.
  bool MustGiveWay() const;
  // Waits while MustGiveWay(): before taking work, and at the engine's yield points.
  void GiveWay(std::stop_token stop);
  // A fresh instance for one the watchdog aborted; null (the worker stops) if none can be made.
  std::unique_ptr<Instance> Restart(std::unique_ptr<Instance> instance);
  Clock::time_point Now() const { return s_.Now(); }
  const std::string& model() const { return s_.options.model; }

  SchedulerState& s_;
  const int index_;
  // How many cores this thread may run on (its affinity, after cpu_affinity): set before Loop.
  size_t cores_ = 0;

 private:
  void Main(std::stop_token stop);

  std::stop_token stop_;  // the thread's, for Yield(); set before the first execution
  std::jthread thread_;   // last
};

template <typename Pred>
bool Worker::WaitForWork(MutexLock& lock, std::stop_token stop, Instance& instance,
                         Pred has_work) {
  const TimeSource& time = *s_.options.time;
  if (!WaitUntil(time, s_.cv, lock, stop, Now() + kParkAfter, has_work)) {
    if (stop.stop_requested()) return false;
    WithLockReleased(lock, [&] { instance.Park(); });
    const auto release = ReleaseAfterPark(instance);
    if (release && !WaitUntil(time, s_.cv, lock, stop, Now() + *release, has_work)) {
      if (stop.stop_requested()) return false;
      WithLockReleased(lock, [&] { instance.Release(); });
    }
    WaitUntil(time, s_.cv, lock, stop, Clock::time_point::max(), has_work);
  }
  return !stop.stop_requested();
}

}  // namespace mmserve
