// Clock and TimeSource: where time decides behaviour (a job's time to live, a model's
// keep-alive, a failed load's back-off, a retired version's drain bound), the code asks a
// TimeSource for "now" instead of the clock, so that tests move time by hand (FakeTime in
// tests/testing/fake_time.h) instead of sleeping. Durations that are measured, not decided on
// (how long a load took), read the clock itself.
#pragma once

#include <chrono>
#include <cstdint>

namespace mmserve {

using Clock = std::chrono::steady_clock;

// A measured duration in whole nanoseconds, as statistics keep it.
inline int64_t Nanos(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// The wall clock in Unix milliseconds: when something happened, for people.
inline int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class TimeSource {
 public:
  virtual ~TimeSource() = default;
  virtual Clock::time_point Now() const = 0;
  // The steady clock itself; lives for the whole program.
  static const TimeSource& Real();
};

}  // namespace mmserve
