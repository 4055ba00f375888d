// EventLog: what happened to the served models, newest last — loads, load failures, unloads
// (and why: idle, evicted, the repository API, retired), breaker trips and recoveries, worker
// restarts, config reloads. The status page shows them; they are also in the log, so the ring
// only needs to hold the recent ones (kCapacity; older events fall off).
//
// Each event has a sequence number, increasing from 1, so a reader asks for those after the
// last it saw. Thread-safe; Record() never blocks on anything but the ring's own mutex, so it
// may be called with other locks held (it calls nothing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace mmserve {

struct Event {
  uint64_t seq = 0;
  int64_t unix_ms = 0;  // wall-clock time, for people
  std::string kind;     // "loaded", "load_failed", "unloaded", "breaker_open", ...
  std::string model;    // empty for the server's own (a reload)
  int64_t version = 0;  // 0 with no model
  std::string message;
};

class EventLog {
 public:
  static constexpr size_t kCapacity = 256;

  // Returns the event as recorded (with its seq and time).
  Event Record(std::string kind, std::string model, int64_t version, std::string message);
  // The events with seq > `after`, oldest first, at most `limit`.
  std::vector<Event> Since(uint64_t after, size_t limit = kCapacity) const;
  uint64_t last_seq() const;

 private:
  mutable Mutex mu_;
  std::deque<Event> ring_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;
};

}  // namespace mmserve
