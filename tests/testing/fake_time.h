// FakeTime: a TimeSource that moves only when a test says so. Inject it where time decides
// behaviour (common/clock.h) and call Advance() instead of sleeping. Thread-safe.
#pragma once

#include <atomic>

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

 private:
  std::atomic<Clock::rep> now_;
};

}  // namespace mmserve::testing
