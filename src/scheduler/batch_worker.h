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
  };
  // Takes the next call's requests and shows the watchdog what runs.
  Call TakeCall(Instance& instance) REQUIRES(s_.mu);
  // Executes `call` and answers its requests (without s_.mu held).
  void RunCall(Call& call, Instance& instance) EXCLUDES(s_.mu);
  // Answers the requests of an executed call whose callbacks the watchdog left in `dones`;
  // statuses[k] is executions[k]'s.
  void AnswerCall(Call& call, std::vector<InferCallback>& dones,
                  const std::vector<Status>& statuses, Clock::time_point end);

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
