// The scheduler's watchdog thread. It wakes at the next deadline (or hang report due) and
// answers 504 then: queued requests past their deadline (and cancelled ones, within kWatchCap),
// executing batches' requests and generations' sequences past theirs (their execution goes
// on; the late result is discarded). An execution still running watchdog_margin past its
// deadline is reported once: its requests are answered, the breaker opened and the instance
// aborted, which its worker then replaces (model_scheduler.h).
#pragma once

#include <thread>
#include <vector>

#include "scheduler/worker.h"

namespace mmserve {

class Watchdog {
 public:
  explicit Watchdog(SchedulerState& s);
  ~Watchdog();  // stops and joins

 private:
  // A request answered here once the lock is let go.
  struct Answer {
    Ledger ledger;
    InferCallback done;
    Status status;
    std::unique_ptr<Pending> owned;  // set when the request left its queue or instance here
  };

  void Loop(std::stop_token stop);
  // When to wake next.
  Clock::time_point NextWatch(Clock::time_point now) const REQUIRES(s_.mu);
  // Queued requests that expired or were cancelled, and executing ones past their deadline.
  void CollectDead(Clock::time_point now, std::vector<Answer>& answers) REQUIRES(s_.mu);
  // Executions past deadline + margin: reported, the breaker tripped, the instance aborted.
  void CollectHung(Clock::time_point now, std::vector<Answer>& answers) REQUIRES(s_.mu);

  SchedulerState& s_;
  std::jthread thread_;  // last
};

}  // namespace mmserve
