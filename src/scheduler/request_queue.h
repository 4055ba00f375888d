// RequestQueue: one model's waiting requests by priority level (1 = highest .. 9), FIFO within
// a level, each level bounded. Not synchronized: the scheduler's threads share it under one
// lock (scheduler/worker.h).
//
// Also here: Pending, the record a request lives in from Enqueue() to its answer, and the two
// answers a request gets without the model's: DeadOutcome (it expired or was cancelled before
// it ran) and Overrun (its execution ran past its deadline).
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/infer_request.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "config/model_config.h"
#include "scheduler/circuit_breaker.h"

namespace mmserve {

// What the finish path needs of a request: copied out under the lock by whoever answers for
// another thread (the watchdog), since the owner may free the Pending once the lock is let go.
struct Ledger {
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

// A request from Enqueue() to its answer.
struct Pending {
  std::unique_ptr<InferRequest> request;  // moved into a continuous instance when admitted
  InferCallback done;                     // taken exactly once, under the lock once executing
  Ledger ledger;
  int level = kDefaultPriority;
  Clock::time_point arrival;  // the request's
  Clock::time_point deadline;
  std::shared_ptr<PartialGate> partials;  // continuous, with on_partial: see PartialGate
};

// Requests that leave without running, with their answer.
using DeadRequests = std::vector<std::pair<std::unique_ptr<Pending>, Status>>;

// 504 if `p` is past its deadline at `now`, 499-style Cancelled if its client went away, else
// OK. For a request that has not run (queued, or about to).
Status DeadOutcome(const std::string& model, const Pending& p, Clock::time_point now);
// 504 for a request whose execution ran past its deadline (a timeout for the breaker).
Status Overrun(const std::string& model, const Pending& p, Clock::time_point now);

class RequestQueue {
 public:
  using Levels = std::array<LevelPolicy, kMaxPriorityLevel + 1>;

  // `model` names it in errors; `levels` bounds each level (index 1..kMaxPriorityLevel).
  RequestQueue(std::string model, const Levels& levels);

  // The next request's sequence number (arrival order; also for requests never queued).
  uint64_t NextSeq() { return next_seq_++; }
  // Queues `p` at its level with the next sequence number and returns OK, or, leaving `p` as
  // it is, Unavailable once closed and ResourceExhausted when the level is full.
  Status Push(std::unique_ptr<Pending>& p);
  // No request is queued from now on (Push fails); what is queued stays.
  void Close() { open_ = false; }
  // OK while requests are taken, Unavailable once closed.
  Status CheckOpen() const;

  // Up to `n` live requests, highest level first; expired and cancelled ones met on the way go
  // to `dead` with their answer.
  std::vector<std::unique_ptr<Pending>> Take(size_t n, Clock::time_point now, DeadRequests& dead);
  // Every expired or cancelled request, wherever it waits; the others keep their order. One
  // pass over the queue.
  void TakeDead(Clock::time_point now, DeadRequests& dead);
  // Everything queued, in arrival order (at shutdown).
  std::vector<std::unique_ptr<Pending>> TakeAll();

  int64_t size() const { return size_; }
  int64_t size(int level) const {
    return static_cast<int64_t>(queues_[static_cast<size_t>(level)].size());
  }
  // When the longest-waiting request was queued, and the earliest deadline of any; max() when
  // empty.
  Clock::time_point OldestEnqueued() const;
  Clock::time_point EarliestDeadline() const;

 private:
  const std::string model_;
  const Levels levels_;
  std::array<std::deque<std::unique_ptr<Pending>>, kMaxPriorityLevel + 1> queues_;
  int64_t size_ = 0;  // the sum of the queues' sizes
  uint64_t next_seq_ = 0;
  bool open_ = true;
};

}  // namespace mmserve
