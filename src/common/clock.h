// Clock and TimeSource: where time decides behaviour (a job's time to live, a model's
// keep-alive, a failed load's back-off, a retired version's drain bound, a request's deadline,
// a batch window), the code asks a TimeSource for "now" — and waits on it — instead of the
// clock, so that tests move time by hand (FakeTime in tests/testing/fake_time.h) instead of
// sleeping. Durations that are measured, not decided on (how long a load took), read the clock
// itself.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <stop_token>

#include "common/mutex.h"

namespace mmserve {

using Clock = std::chrono::steady_clock;

// A measured duration in whole nanoseconds, as statistics keep it.
inline int64_t Nanos(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// A duration in whole milliseconds, for messages.
inline int64_t Millis(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
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
  // Blocks on `cv` (`lock` holds its mutex) until it is notified, `stop` is requested or Now()
  // reaches `until`, whichever comes first; may return early, so callers check again (see
  // WaitUntil below). The steady clock sleeps until `until`; a fake one wakes every so often to
  // see whether it was moved.
  virtual void WaitOnce(std::condition_variable_any& cv, MutexLock& lock, std::stop_token stop,
                        Clock::time_point until) const;
  // The steady clock itself; lives for the whole program.
  static const TimeSource& Real();
};

// Waits on `cv` until `ready()`, `stop` or `time`'s `until` (Clock::time_point::max(): no
// bound); returns ready(). REQUIRES: `lock` holds the mutex `ready` reads (the analysis cannot
// see through the reference, hence no check here).
template <typename Ready>
bool WaitUntil(const TimeSource& time, std::condition_variable_any& cv, MutexLock& lock,
               std::stop_token stop, Clock::time_point until, Ready ready)
    NO_THREAD_SAFETY_ANALYSIS {
  while (!ready()) {
    if (stop.stop_requested() || time.Now() >= until) return ready();
    time.WaitOnce(cv, lock, stop, until);
  }
  return true;
}

}  // namespace mmserve
