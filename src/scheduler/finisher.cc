#include "scheduler/finisher.h"

namespace mmserve {
namespace {

CircuitBreaker::Outcome OutcomeOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
    // The model answered; the request was at fault.
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists:
      return CircuitBreaker::Outcome::kSuccess;
    case StatusCode::kCancelled:
    case StatusCode::kResourceExhausted:  // a limit of the request's (context length, queue)
      return CircuitBreaker::Outcome::kNeutral;
    case StatusCode::kDeadlineExceeded:
      return CircuitBreaker::Outcome::kTimeout;
    default:
      return CircuitBreaker::Outcome::kFailure;
  }
}

}  // namespace

Finisher::Finisher(const ModelScheduler::Options& options, CircuitBreaker& breaker)
    : options_(options), breaker_(breaker) {
  stats_.workers.resize(static_cast<size_t>(options_.thread_num));
}

void Finisher::Finish(const Ledger& p, InferCallback done, Result<InferResponse> result,
                      bool tell_breaker) {
  if (options_.gate) options_.gate->Leave(options_.default_priority);
  const auto now = options_.time->Now();
  const Status& status = result.status();
  std::string what;
  if (!status.ok()) what = std::string(StatusCodeName(status.code())) + ": " + std::string(status.message());
  const bool executed = p.started != Clock::time_point();
  const CircuitBreaker::Outcome outcome = OutcomeOf(status);
  // A request that expired in the queue says the model is busy, not that it is broken.
  breaker_.Record(p.ticket,
                  executed && tell_breaker ? outcome : CircuitBreaker::Outcome::kNeutral, what,
                  now);
  {
    MutexLock lock(stats_mu_);
    const int64_t took = Nanos(now - p.enqueued);
    if (status.ok()) {
      ++stats_.success;
      stats_.success_ns += took;
    } else if (!executed && status.code() == StatusCode::kDeadlineExceeded) {
      ++stats_.expired;
      stats_.fail_ns += took;
    } else if (status.code() == StatusCode::kCancelled) {
      ++stats_.cancelled;
    } else if (outcome == CircuitBreaker::Outcome::kFailure ||
               outcome == CircuitBreaker::Outcome::kTimeout) {
      ++stats_.failure;
      stats_.fail_ns += took;
    } else {
      ++stats_.success;  // answered, with the request's own error
      stats_.success_ns += took;
    }
    if (status.code() != StatusCode::kCancelled) stats_.request_latency.Record(took);
    if (executed) {
      const int64_t queued = Nanos(p.started - p.enqueued);
      const int64_t computed = Nanos(now - p.started);
      if (result.ok()) {
        result->queue_ns = queued;
        result->compute_ns = computed;
      }
      stats_.queue_latency.Record(queued);
      stats_.compute_latency.Record(computed);
    }
  }
  Deliver(p.seq, std::move(done), std::move(result));
}

void Finisher::Reject(const CircuitBreaker::Ticket& ticket, const InferCallback& done,
                      const Status& why) {
  if (ticket.probe) {
    breaker_.Record(ticket, CircuitBreaker::Outcome::kNeutral, "", options_.time->Now());
  }
  {
    MutexLock lock(stats_mu_);
    ++stats_.rejected;
  }
  if (done) done(why);
}

void Finisher::Deliver(uint64_t seq, InferCallback done, Result<InferResponse> result) {
  if (!options_.preserve_ordering) {
    if (done) done(std::move(result));
    return;
  }
  // Hold it until every earlier request has been delivered. Callbacks run under order_mu_ so
  // that two threads cannot overtake each other between the check and the call.
  MutexLock lock(order_mu_);
  held_.emplace(seq, std::make_pair(std::move(done), std::move(result)));
  while (!held_.empty() && held_.begin()->first == next_deliver_) {
    auto node = held_.extract(held_.begin());
    if (node.mapped().first) node.mapped().first(std::move(node.mapped().second));
    ++next_deliver_;
  }
}

void Finisher::CountExecution(const Execution& execution, Clock::duration took) {
  MutexLock lock(stats_mu_);
  ++stats_.execution_count;
  stats_.inference_count += static_cast<int64_t>(execution.items.size());
  BatchStats& b = stats_.batches[execution.tier];
  ++b.executions;
  b.compute_ns += Nanos(took);
}

void Finisher::CountStep(int sequences, Clock::duration took) {
  MutexLock lock(stats_mu_);
  ++stats_.execution_count;
  BatchStats& b = stats_.batches[sequences];
  ++b.executions;
  b.compute_ns += Nanos(took);
}

void Finisher::CountSequence() {
  MutexLock lock(stats_mu_);
  ++stats_.inference_count;
}

void Finisher::CountYield(Clock::duration waited) {
  MutexLock lock(stats_mu_);
  ++stats_.yields;
  stats_.yield_ns += Nanos(waited);
}

void Finisher::CountWatchdogReport() {
  MutexLock lock(stats_mu_);
  ++stats_.watchdog_reports;
}

void Finisher::SetWorker(int index, const WorkerInfo& info) {
  MutexLock lock(stats_mu_);
  stats_.workers[static_cast<size_t>(index)] = info;
}

void Finisher::CountRestart(int index) {
  MutexLock lock(stats_mu_);
  ++stats_.workers[static_cast<size_t>(index)].restarts;
}

SchedulerStats Finisher::stats() const {
  MutexLock lock(stats_mu_);
  return stats_;
}

}  // namespace mmserve
