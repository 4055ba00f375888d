#include "scheduler/priority_gate.h"

#include <algorithm>

namespace mmserve {

void PriorityGate::Enter(int level) {
  levels_[static_cast<size_t>(level)].busy.fetch_add(1);
}

void PriorityGate::Leave(int level) {
  Level& l = levels_[static_cast<size_t>(level)];
  l.last_leave.store(time_.Now().time_since_epoch().count(), std::memory_order_relaxed);
  l.busy.fetch_sub(1);
}

bool PriorityGate::MayYield(int level) const {
  for (int l = 1; l < level; ++l) {
    if (levels_[static_cast<size_t>(l)].models.load(std::memory_order_relaxed) > 0) return true;
  }
  return false;
}

Clock::time_point PriorityGate::ResumeAt(int level, Clock::time_point now) const {
  Clock::time_point resume = now;
  for (int l = 1; l < level; ++l) {
    const Level& higher = levels_[static_cast<size_t>(l)];
    if (higher.busy.load() > 0) return Clock::time_point::max();
    const int64_t last = higher.last_leave.load(std::memory_order_relaxed);
    if (last == 0) continue;
    resume = std::max(resume, Clock::time_point(Clock::duration(last)) + linger_);
  }
  return resume;
}

Clock::duration PriorityGate::Wait(int level, Clock::time_point until, std::stop_token stop) {
  const auto start = time_.Now();
  // Polls once per linger while the more important level is busy rather than being woken by
  // Leave(): that would cost the busy model a lock and a wake-up per answer, and this waiter a
  // trip through the scheduler for each, only to sleep out the linger anyway.
  const Clock::duration poll = std::max<Clock::duration>(linger_, std::chrono::milliseconds(1));
  MutexLock lock(mu_);
  while (!stop.stop_requested()) {
    const auto now = time_.Now();
    const auto resume = ResumeAt(level, now);
    if (resume <= now || now >= until) break;
    const auto wake_at = std::min({resume, until, now + poll});
    time_.WaitOnce(cv_, lock, stop, wake_at);  // never notified: only a stop ends it early
  }
  return time_.Now() - start;
}

}  // namespace mmserve
