// PriorityGate: the models of one device give way to more important ones.
//
// Queues, workers and instances are per model, so a model's priority levels order its own
// queue; across models nothing in the queues makes one wait for another. What they share is
// the device's compute — on a CPU, its cores. A low-priority model saturated with work keeps
// every core busy, and a high-priority request then waits for the operating system to hand a
// core over (at the end of a time slice, while the engine's threads wait for one another at
// barriers): that, not queueing, sets the high-priority model's latency tail.
//
// The gate makes the lower model stop instead. A model counts as busy from a request's
// admission to its answer, and for `linger` after its last answer (a client's next request is
// usually already on its way). While any model of a more important level (a lower number) on
// the same device is busy, a model's workers start no execution, and an execution in progress
// pauses at the engine's yield points (llama.cpp: between layers of its compute graph).
//
//   A (level 1): ──req──req─req──────────req──►
//   B (level 3): ██████ paused ·················· (linger) ███████ paused ····
//
// Strict, like priority levels within a model: a lower level gets the time the higher ones
// leave idle for longer than `linger`. Equal levels never wait for each other, so a server
// whose models all keep the default priority never waits here.
//
// Thread-safe. Enter/Leave are lock-free and wake no one (a waiting model polls once per
// linger); MustYield is a few loads (engines ask it between graph layers).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <stop_token>

#include "backend/infer_request.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "config/model_config.h"

namespace mmserve {

class PriorityGate {
 public:
  static constexpr std::chrono::milliseconds kDefaultLinger{5};

  // `time`: what lingers and waits go by (tests: a FakeTime); not owned, outlives the gate.
  explicit PriorityGate(std::chrono::microseconds linger = kDefaultLinger,
                        const TimeSource& time = TimeSource::Real())
      : linger_(linger), time_(time) {}

  // A model at `level` was loaded on the device / unloaded.
  void AddModel(int level) { levels_[static_cast<size_t>(level)].models.fetch_add(1); }
  void RemoveModel(int level) { levels_[static_cast<size_t>(level)].models.fetch_sub(1); }
  // True when a model of a more important level than `level` is loaded: only then can
  // MustYield(level) ever be true, and only then need an engine stop at its yield points.
  bool MayYield(int level) const;

  // A request of a model at `level` was admitted / was answered.
  void Enter(int level);
  void Leave(int level);

  // True while a model of a more important level than `level` is busy.
  bool MustYield(int level) const {
    const auto now = time_.Now();
    return ResumeAt(level, now) > now;
  }

  // Blocks while MustYield(level), but not past `until` nor once `stop` is requested. Returns
  // how long it waited.
  Clock::duration Wait(int level, Clock::time_point until, std::stop_token stop);

 private:
  // The earliest time `level` may run, judged at `now`: Clock::time_point::max() while a more
  // important level has requests out, the end of its linger after its last one, else `now`.
  Clock::time_point ResumeAt(int level, Clock::time_point now) const;

  struct alignas(64) Level {
    std::atomic<int> models{0};           // loaded
    std::atomic<int64_t> busy{0};         // requests admitted and not answered yet
    std::atomic<int64_t> last_leave{0};   // Clock ticks of the last answer; 0 = never
  };

  const Clock::duration linger_;
  const TimeSource& time_;
  std::array<Level, kMaxPriorityLevel + 1> levels_{};  // index 0 unused
  Mutex mu_;                        // only for cv_
  std::condition_variable_any cv_;  // never notified: waits end by time or by stop
};

}  // namespace mmserve
