// ModelScheduler: the queue and worker threads of one loaded model.
//
// Requests wait in a bounded FIFO queue; each of `thread_num` workers owns one Instance of the
// session (created on that worker's thread, used by no other), takes up to `max_batch` queued
// requests at a time (waiting up to max_queue_delay for a partial batch to fill) and executes
// them as one batch. A request whose deadline passed while it
// was queued is answered DeadlineExceeded without being executed.
//
// Threads: owns `thread_num` worker threads, started by Create() and joined by the destructor.
// Enqueue() is thread-safe and never blocks on a device.
//
// TODO(#4): priority levels and batch tiers of the dynamic batcher, breaker, watchdog.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "common/result.h"

namespace mmserve {

class ModelScheduler {
 public:
  struct Options {
    std::string model;          // for logs and errors
    int thread_num = 1;
    int max_batch = 1;
    // A worker with fewer than max_batch requests queued waits up to this long (from the oldest
    // request's arrival) for the batch to fill.
    std::chrono::milliseconds max_queue_delay{0};
    int64_t max_queue_size = 1024;
    std::vector<int> cpu_affinity;  // cores the workers are pinned to; empty = any
  };

  // Starts the workers and waits until each has created its Instance; fails (with every
  // worker stopped) if any instance cannot be created. `session` is not owned and must outlive
  // the scheduler.
  static Result<std::unique_ptr<ModelScheduler>> Create(Options options, Session& session);
  ~ModelScheduler();  // stops, answers anything still queued with Unavailable, joins

  // Always takes ownership of `request`. If the queue is full or the scheduler is stopping,
  // completes the request with ResourceExhausted / Unavailable and returns that status too.
  Status Enqueue(std::unique_ptr<InferRequest> request);

  // Stops accepting; workers still finish what is queued. Returns at once.
  void StopAccepting();

  int64_t queued() const;
  int64_t executing() const;

 private:
  ModelScheduler(Options options, Session& session);
  void WorkerLoop(std::stop_token stop, int index);
  // The loop of a kContinuous session's worker: admit into free slots, step, repeat.
  void ContinuousLoop(std::stop_token stop, ContinuousInstance& instance);
  // Removes expired requests from the queue front and returns up to `n` live ones.
  std::vector<std::unique_ptr<InferRequest>> TakeRequests(std::unique_lock<std::mutex>& lock,
                                                          size_t n);
  static void Complete(std::unique_ptr<InferRequest> request, Result<InferResponse> result);

  const Options options_;
  Session& session_;  // not owned

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::unique_ptr<InferRequest>> queue_;  // guarded by mu_
  bool accepting_ = true;                            // guarded by mu_
  int64_t executing_ = 0;                            // guarded by mu_
  int instances_ready_ = 0;                          // guarded by mu_
  Status instance_error_;                            // guarded by mu_

  std::vector<std::jthread> workers_;  // last: joined before the members above are destroyed
};

}  // namespace mmserve
