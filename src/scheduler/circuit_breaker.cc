#include "scheduler/circuit_breaker.h"

#include <algorithm>

#include "common/logging.h"

namespace mmserve {

std::string_view BreakerStateName(CircuitBreaker::State state) {
  switch (state) {
    case CircuitBreaker::State::kClosed: return "closed";
    case CircuitBreaker::State::kOpen: return "open";
    case CircuitBreaker::State::kHalfOpen: return "half_open";
  }
  return "unknown";
}

Status CircuitBreaker::Admit(Clock::time_point now, Ticket& ticket) {
  ticket.probe = false;
  MutexLock lock(mu_);
  if (state_ == State::kClosed) return Status::Ok();
  if (state_ == State::kOpen && now - opened_at_ >= options_.cooldown) {
    state_ = State::kHalfOpen;
    spdlog::info("model {}: circuit breaker half-open; letting one probe request through", model_);
    Changed(state_, "letting one probe request through");
  }
  if (state_ == State::kHalfOpen && !probe_out_) {
    probe_out_ = true;
    ticket.probe = true;
    return Status::Ok();
  }
  std::string retry;
  int64_t retry_after_s = 1;
  if (state_ == State::kOpen) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        options_.cooldown - (now - opened_at_));
    retry = "; a probe request is let through in " + std::to_string(left.count()) + " ms";
    retry_after_s = std::max<int64_t>(1, (left.count() + 999) / 1000);
  } else {
    retry = "; a probe request is checking whether it recovered";
  }
  return Unavailable("model '" + model_ + "' is out of service (circuit breaker open): " +
                     reason_ + retry)
      .WithRetryAfter(retry_after_s);
}

void CircuitBreaker::Record(const Ticket& ticket, Outcome outcome, const std::string& what,
                            Clock::time_point now) {
  MutexLock lock(mu_);
  if (ticket.probe) {
    probe_out_ = false;
    if (state_ != State::kHalfOpen) return;  // tripped again meanwhile
    if (outcome == Outcome::kSuccess) {
      state_ = State::kClosed;
      failures_ = timeouts_ = 0;
      reason_.clear();
      spdlog::info("model {}: circuit breaker closed; the probe request succeeded", model_);
      Changed(state_, "the probe request succeeded");
    } else if (outcome == Outcome::kFailure || outcome == Outcome::kTimeout) {
      Open("the probe request " +
               std::string(outcome == Outcome::kTimeout ? "timed out: " : "failed: ") + what,
           now);
    }
    return;
  }
  if (state_ != State::kClosed) return;  // requests admitted before it opened say nothing new
  switch (outcome) {
    case Outcome::kSuccess:
      failures_ = timeouts_ = 0;
      break;
    case Outcome::kFailure:
      if (++failures_; options_.failures > 0 && failures_ >= options_.failures) {
        Open(std::to_string(failures_) + " consecutive failures, the last: " + what, now);
      }
      break;
    case Outcome::kTimeout:
      if (++timeouts_; options_.timeouts > 0 && timeouts_ >= options_.timeouts) {
        Open(std::to_string(timeouts_) + " consecutive timeouts, the last: " + what, now);
      }
      break;
    case Outcome::kNeutral:
      break;
  }
}

void CircuitBreaker::Trip(const std::string& why, Clock::time_point now) {
  MutexLock lock(mu_);
  Open(why, now);
}

void CircuitBreaker::Open(std::string why, Clock::time_point now) {
  state_ = State::kOpen;
  opened_at_ = now;
  failures_ = timeouts_ = 0;
  reason_ = std::move(why);
  ++times_opened_;
  spdlog::warn("model {}: circuit breaker open for {} ms: {}", model_, options_.cooldown.count(),
               reason_);
  Changed(state_, reason_);
}

void CircuitBreaker::Changed(State to, const std::string& why) {
  if (on_change_) on_change_(to, why);
}

CircuitBreaker::State CircuitBreaker::state() const {
  MutexLock lock(mu_);
  return state_;
}

std::string CircuitBreaker::reason() const {
  MutexLock lock(mu_);
  return reason_;
}

int64_t CircuitBreaker::times_opened() const {
  MutexLock lock(mu_);
  return times_opened_;
}

}  // namespace mmserve
