// FakeTime: a TimeSource that moves only when a test says so. Inject it where time decides
// behaviour (common/clock.h) and call Advance() instead of sleeping. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>

#include "common/clock.h"

namespace mmserve::testing {

class FakeTime final : public TimeSource {
 public:
  // Starts at the real now, so that times computed from it stay in the clock's range.
  FakeTime() : now_(Clock::now().time_since_epoch().count()) {}
  Clock::time_point Now() const override {
    return Clock::time_point(Clock::duration(now_.load()));
  }
  void Advance(Clock::duration d) { now_.fetch_add(d.count()); }

  // A waiter wakes every real millisecond to see whether the test moved time past `until`:
  // Advance() needs no lock of the waiter's, and a wait never outlasts the step that ends it
  // by more than that.
  void WaitOnce(std::condition_variable_any& cv, MutexLock& lock, std::stop_token stop,
                Clock::time_point until) const override {
    if (Now() >= until) return;
    TimeSource::Real().WaitOnce(cv, lock, std::move(stop),
                                Clock::now() + std::chrono::milliseconds(1));
  }

 private:
  std::atomic<Clock::rep> now_;
};

}  // namespace mmserve::testing
