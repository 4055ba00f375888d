// The request records ModelScheduler's parts share: model_scheduler.cc (queues, admission,
// answers, the watchdog) and batch_loops.cc (the workers' execution loops). Internal to
// scheduler/.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "scheduler/model_scheduler.h"

namespace mmserve {

// What Finish() needs of a request: copied out under mu_ by whoever answers for another thread
// (the watchdog), since the owner may free the Pending as soon as the lock is released.
struct ModelScheduler::Ledger {
  uint64_t seq = 0;
  CircuitBreaker::Ticket ticket;
  Clock::time_point enqueued;
  Clock::time_point started;  // execution start; epoch while queued
};

// A generation's partial answers, closed once the watchdog has answered it at its deadline: a
// partial in flight finishes before the final answer goes out, and none follows it (the
// instance sees its on_partial refuse, and ends the sequence).
struct PartialGate {
  Mutex mu;
  bool closed GUARDED_BY(mu) = false;
};

// A request from Enqueue() to Finish().
struct ModelScheduler::Pending {
  std::unique_ptr<InferRequest> request;  // moved into a continuous instance when admitted
  InferCallback done;                     // taken exactly once, under mu_ once executing
  Ledger ledger;
  int level = kDefaultPriority;
  Clock::time_point arrival;  // the request's
  Clock::time_point deadline;
  std::shared_ptr<PartialGate> partials;  // continuous, with on_partial: see PartialGate
};

// A request the watchdog answers, once it has released mu_.
struct ModelScheduler::Answer {
  Ledger ledger;
  InferCallback done;
  Status status;
  std::unique_ptr<Pending> owned;  // set when the request left its queue or instance here
};

// What a worker is executing now, for the watchdog.
struct ModelScheduler::Running {
  bool active = false;
  bool reported = false;
  Clock::time_point start;             // the execution's (continuous: its oldest sequence's)
  Clock::time_point deadline;          // the latest deadline of the requests it serves
  std::vector<Pending*> pendings;      // batch style; continuous: see active_
  const Execution* execution = nullptr;  // batch style: its stage
  int batch = 0;
  Instance* instance = nullptr;
  bool paused = false;               // giving way at the PriorityGate now
  Clock::duration paused_for{0};     // summed; the watchdog adds it to the deadline
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

inline ModelScheduler::Running& ModelScheduler::RunningSlot(int w) {
  return running_[static_cast<size_t>(w)];
}

inline std::map<ModelScheduler::Pending*, std::unique_ptr<ModelScheduler::Pending>>&
ModelScheduler::ActiveSlot(int w) {
  return active_[static_cast<size_t>(w)];
}

}  // namespace mmserve
