// The batch style's workers. A BatchWorker thread takes up to max_batch requests (after waiting
// up to max_queue_delay for more, and with hold_partial_batches while another worker's batch
// runs), executes them as one batch on its instance and answers each. An InlineWorker runs one
// request at a time on the thread that enqueues it (Session::executes_inline): no queue, no
// thread crossing, the same finish path.
#pragma once

#include <memory>
#include <vector>

#include "scheduler/worker.h"

namespace mmserve {

class BatchWorker final : public Worker {
 public:
  BatchWorker(SchedulerState& s, int index) : Worker(s, index) {}

 private:
  void Loop(std::stop_token stop, std::unique_ptr<Instance> instance) override;
  // Whether a worker other than this one is executing a batch now.
  bool AnotherBatchExecuting() const REQUIRES(s_.mu);
  // Before taking a batch: waits up to max_queue_delay for a partial batch to fill and, with
  // hold_partial_batches, while another worker's batch executes. False when nothing is left to
  // take (another worker took it) or the scheduler stops. `lock` holds s_.mu.
  bool WaitForBatch(MutexLock& lock, std::stop_token stop) REQUIRES(s_.mu);
  // One call of the instance: up to max_batch × batches_per_call requests, split into batches.
  struct Call {
    Clock::time_point start;
    std::vector<std::unique_ptr<Pending>> batch;
    std::vector<BatchItem> items;         // batch[i]'s request and result
    std::vector<Execution> executions;    // over `items`, max_batch each
    DeadRequests dead;                    // met on the way: expired or cancelled
    // Once finished: statuses[k] is executions[k]'s; the callbacks the watchdog left; when the
    // results came; whether the queue was empty then.
    std::vector<Status> statuses;
    std::vector<InferCallback> dones;
    Clock::time_point end;
    bool nothing_queued = false;
  };
  // Takes the next call's requests and shows the watchdog what runs.
  Call TakeCall(Instance& instance) REQUIRES(s_.mu);
  // Whether the next call may start before the last one's answers are written: requests are
  // queued that no batch window or held partial batch would keep waiting.
  bool MayStartNext(std::stop_token stop) const REQUIRES(s_.mu);
  // A call's three steps, without s_.mu held: answers the requests found dead and hands the
  // rest to the instance (Instance::StartEach); waits for the results (FinishEach) and takes
  // back the callbacks from the watchdog; answers them.
  void StartCall(Call& call, Instance& instance) EXCLUDES(s_.mu);
  void FinishCall(Call& call, Instance& instance) EXCLUDES(s_.mu);
  void AnswerCall(Call& call, bool next_started) EXCLUDES(s_.mu);

  // How late a batch window's timed wait has been waking (a moving average); the next window's
  // wait ends that much early, so that it closes when configured. This thread's only.
  Clock::duration window_lag_{0};
  bool reported_ = false;  // the watchdog reported the last call: replace the instance
};

class InlineWorker {
 public:
  InlineWorker(SchedulerState& s, std::unique_ptr<Instance> instance)
      : s_(s), instance_(std::move(instance)) {}

  // Executes `p` (admitted and counted executing) on this thread and finishes it.
  void Run(std::unique_ptr<Pending> p);

 private:
  SchedulerState& s_;
  const std::unique_ptr<Instance> instance_;  // run by every calling thread
};

// `items` as the batches of at most `max_batch` one call executes (see Instance::ExecuteEach),
// each at the smallest of `tiers` that holds it (its own size when `tiers` is empty).
std::vector<Execution> SplitIntoBatches(BatchView items, size_t max_batch,
                                        const std::vector<int>& tiers);

}  // namespace mmserve
