// CircuitBreaker: takes a model out of service after N consecutive failures or M consecutive
// timeouts (the template's "N timeouts → unavailable → 503"), lets one probe request through
// after a cool-down, and puts the model back when the probe succeeds.
//
//   kClosed ──N failures / M timeouts / Trip()──► kOpen ──cool-down passed, next request──► kHalfOpen
//      ▲                                           ▲                                         │
//      └──────────── the probe succeeds ───────────┴────────── the probe fails ──────────────┘
//
// Thread-safe. The clock is passed in, so tests need not sleep.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "common/mutex.h"
#include "common/status.h"
#include "config/model_config.h"

namespace mmserve {

class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { kClosed, kOpen, kHalfOpen };
  // kTimeout: the execution ran past its request's deadline. kNeutral: says nothing about the
  // model (the client cancelled, the queue was full, the request expired while queued).
  enum class Outcome { kSuccess, kFailure, kTimeout, kNeutral };

  // failures / timeouts: the consecutive counts that open it; 0 = never (Trip() still does).
  using Options = BreakerConfig;

  // The ticket of one admitted request, handed back to Record().
  struct Ticket {
    bool probe = false;
  };

  // Hears every change of state with its reason (the status page's events); called with the
  // breaker's lock held, so it must not call back into the breaker.
  using OnChange = std::function<void(State to, const std::string& why)>;

  CircuitBreaker(std::string model, Options options, OnChange on_change = {})
      : model_(std::move(model)), options_(options), on_change_(std::move(on_change)) {}

  // OK (with a ticket) when a request may go ahead; Unavailable with the reason when the breaker
  // is open (its retry_after_s() the cool-down left), or half-open with its probe still out.
  Status Admit(Clock::time_point now, Ticket& ticket);
  // The outcome of an admitted request; `what` describes a failure for the reason text.
  void Record(const Ticket& ticket, Outcome outcome, const std::string& what,
              Clock::time_point now);
  // Opens the breaker at once (the watchdog found a hung execution).
  void Trip(const std::string& why, Clock::time_point now);

  State state() const;
  std::string reason() const;  // why it is open; empty when closed
  int64_t times_opened() const;

 private:
  void Open(std::string why, Clock::time_point now) REQUIRES(mu_);
  void Changed(State to, const std::string& why) REQUIRES(mu_);

  const std::string model_;
  const Options options_;
  const OnChange on_change_;
  mutable Mutex mu_;
  State state_ GUARDED_BY(mu_) = State::kClosed;
  int failures_ GUARDED_BY(mu_) = 0;  // consecutive, since the last success
  int timeouts_ GUARDED_BY(mu_) = 0;  // consecutive, since the last success
  bool probe_out_ GUARDED_BY(mu_) = false;
  Clock::time_point opened_at_ GUARDED_BY(mu_);
  std::string reason_ GUARDED_BY(mu_);
  int64_t times_opened_ GUARDED_BY(mu_) = 0;
};

std::string_view BreakerStateName(CircuitBreaker::State state);  // "closed", "open", "half_open"

}  // namespace mmserve
