#include "common/clock.h"

#include <utility>

namespace mmserve {
namespace {

class SteadyTime final : public TimeSource {
 public:
  Clock::time_point Now() const override { return Clock::now(); }
};

}  // namespace

void TimeSource::WaitOnce(std::condition_variable_any& cv, MutexLock& lock, std::stop_token stop,
                          Clock::time_point until) const {
  // The predicate is false before the wait and true after any wake-up: one wait, with the
  // stop token registered (a stop wakes it).
  bool woken = false;
  const auto once = [&woken] { return std::exchange(woken, true); };
  if (until == Clock::time_point::max()) {
    cv.wait(lock, stop, once);  // no bound: a timed wait at the clock's end may overflow
  } else {
    cv.wait_until(lock, stop, until, once);
  }
}

const TimeSource& TimeSource::Real() {
  static const SteadyTime kSteady;
  return kSteady;
}

}  // namespace mmserve
