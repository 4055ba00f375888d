// The continuous style's worker (generators): it admits queued requests into its instance's
// free slots as they arrive and steps every admitted sequence at once (a token step). The
// requests it admitted wait in its slot (WorkerSlot::active) until the instance ends them, so
// that the watchdog can answer one at its deadline while a step runs.
#pragma once

#include <memory>
#include <vector>

#include "scheduler/worker.h"

namespace mmserve {

class ContinuousWorker final : public Worker {
 public:
  ContinuousWorker(SchedulerState& s, int index) : Worker(s, index) {}

 private:
  void Loop(std::stop_token stop, std::unique_ptr<Instance> base) override;
  // Takes as many queued requests as `instance` has free slots, into this worker's slot; the
  // requests to admit come back, and those that died queued go to `dead`. Also records what
  // runs now for the watchdog, and returns how many sequences that is in `sequences`.
  std::vector<std::unique_ptr<InferRequest>> TakeAdmitted(ContinuousInstance& instance,
                                                          DeadRequests& dead, int& sequences)
      REQUIRES(s_.mu);
  // The instance ended the sequence of `p`: answered, unless the watchdog did already.
  void OnDone(Pending* p, Result<InferResponse> result);
};

}  // namespace mmserve
