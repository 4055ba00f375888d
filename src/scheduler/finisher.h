// Finisher: the one way a request leaves the scheduler — answered, expired, cancelled, timed
// out or rejected. It tells the circuit breaker the outcome, counts it in the statistics and
// (preserve_ordering) holds an answer until every earlier request's has gone, then calls the
// request back. It keeps the rest of the statistics too: executions, yields, workers, watchdog
// reports. Thread-safe; callbacks run on the calling thread.
#pragma once

#include <map>
#include <utility>

#include "backend/backend.h"
#include "scheduler/model_scheduler.h"
#include "scheduler/request_queue.h"

namespace mmserve {

class Finisher {
 public:
  // `breaker`, `time` and the gate in `options` are not owned and outlive the finisher.
  Finisher(const ModelScheduler::Options& options, CircuitBreaker& breaker);

  // Answers a request that was queued or executing. `tell_breaker`: false when another request
  // of the same execution call already told the breaker this outcome (a failure the requests
  // of one call share counts once).
  void Finish(const Ledger& ledger, InferCallback done, Result<InferResponse> result,
              bool tell_breaker = true);
  // Answers a request never queued (queue full, breaker open, shutting down).
  void Reject(const CircuitBreaker::Ticket& ticket, const InferCallback& done,
              const Status& why);

  // One execution of a batch: its requests, its tier, its compute time.
  void CountExecution(const Execution& execution, Clock::duration took);
  // One step of a continuous instance over `sequences` sequences; one sequence ended.
  void CountStep(int sequences, Clock::duration took);
  void CountSequence();
  void CountYield(Clock::duration waited);
  void CountWatchdogReport();
  void SetWorker(int index, const WorkerInfo& info);
  void CountRestart(int index);

  // The counts so far; the gauges (queued, executing, breaker) are the caller's to fill.
  SchedulerStats stats() const;

 private:
  void Deliver(uint64_t seq, InferCallback done, Result<InferResponse> result);

  const ModelScheduler::Options& options_;
  CircuitBreaker& breaker_;

  mutable Mutex stats_mu_;
  SchedulerStats stats_ GUARDED_BY(stats_mu_);

  Mutex order_mu_;  // preserve_ordering: answers held until their turn
  uint64_t next_deliver_ GUARDED_BY(order_mu_) = 0;
  std::map<uint64_t, std::pair<InferCallback, Result<InferResponse>>> held_ GUARDED_BY(order_mu_);
};

}  // namespace mmserve
