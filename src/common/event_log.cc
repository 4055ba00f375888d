#include "common/event_log.h"

#include "common/clock.h"

namespace mmserve {

Event EventLog::Record(std::string kind, std::string model, int64_t version,
                       std::string message) {
  const int64_t now_ms = UnixMillisNow();
  MutexLock lock(mu_);
  if (ring_.size() == kCapacity) ring_.pop_front();
  ring_.push_back(Event{.seq = next_seq_++,
                        .unix_ms = now_ms,
                        .kind = std::move(kind),
                        .model = std::move(model),
                        .version = version,
                        .message = std::move(message)});
  return ring_.back();
}

std::vector<Event> EventLog::Since(uint64_t after, size_t limit) const {
  MutexLock lock(mu_);
  std::vector<Event> out;
  // The ring's sequence numbers are consecutive: the first wanted one is found by arithmetic.
  size_t first = 0;
  if (!ring_.empty() && after >= ring_.front().seq) {
    first = static_cast<size_t>(after - ring_.front().seq + 1);
  }
  for (size_t i = first; i < ring_.size() && out.size() < limit; ++i) out.push_back(ring_[i]);
  return out;
}

uint64_t EventLog::last_seq() const {
  MutexLock lock(mu_);
  return next_seq_ - 1;
}

}  // namespace mmserve
