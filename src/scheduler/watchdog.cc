#include "scheduler/watchdog.h"

#include <algorithm>

#include "common/logging.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;

// The watchdog wakes at the next deadline or report due, and at least this often.
constexpr auto kWatchCap = 100ms;

}  // namespace

Watchdog::Watchdog(SchedulerState& s)
    : s_(s), thread_([this](std::stop_token stop) { Loop(stop); }) {}

Watchdog::~Watchdog() {
  thread_.request_stop();
  s_.watch_cv.notify_all();
}

Clock::time_point Watchdog::NextWatch(Clock::time_point now) const {
  // A client that leaves while queued is noticed within kWatchCap.
  Clock::time_point next = std::min(now + kWatchCap, s_.queue.EarliestDeadline());
  for (const WorkerSlot& slot : s_.slots) {
    const Running& r = slot.running;
    if (r.active) {
      for (const Pending* p : r.pendings) {
        if (p->done) next = std::min(next, p->deadline);
      }
      if (!r.reported && !r.paused && r.deadline != Clock::time_point::min()) {
        next = std::min(next, r.deadline + r.paused_for + s_.options.watchdog_margin);
      }
    }
    // Continuous: the sequences, each answered at its own deadline.
    for (const auto& [raw, p] : slot.active) {
      if (p->done) next = std::min(next, p->deadline);
    }
  }
  return std::max(next, now + 1ms);
}

void Watchdog::CollectDead(Clock::time_point now, std::vector<Answer>& answers) {
  DeadRequests dead;
  s_.queue.TakeDead(now, dead);
  for (auto& [p, status] : dead) {
    answers.push_back({p->ledger, std::move(p->done), std::move(status), std::move(p)});
  }
  const std::string& model = s_.options.model;
  for (WorkerSlot& slot : s_.slots) {
    // Executing requests whose deadline passed are answered now; the execution goes on, and
    // its result for them is discarded.
    if (slot.running.active) {
      for (Pending* p : slot.running.pendings) {
        if (!p->done || p->deadline > now) continue;
        answers.push_back({p->ledger, std::move(p->done), Overrun(model, *p, now)});
      }
    }
    // Sequences of a continuous instance likewise, at their deadline rather than at the step
    // after it (a step may take hundreds of ms on a loaded machine). The Pending stays until
    // the instance completes the sequence, so that its pointer is never reused meanwhile.
    for (auto& [raw, p] : slot.active) {
      if (!p->done || p->deadline > now) continue;
      if (p->partials) {
        MutexLock gate_lock(p->partials->mu);
        p->partials->closed = true;
      }
      answers.push_back({p->ledger, std::move(p->done), Overrun(model, *p, now)});
    }
  }
}

void Watchdog::CollectHung(Clock::time_point now, std::vector<Answer>& answers) {
  const ModelScheduler::Options& o = s_.options;
  for (size_t w = 0; w < s_.slots.size(); ++w) {
    Running& r = s_.slots[w].running;
    if (!r.active || r.reported || r.paused || r.deadline == Clock::time_point::min() ||
        now < r.deadline + r.paused_for + o.watchdog_margin) {
      continue;
    }
    r.reported = true;
    const Stage stage = r.execution ? r.execution->stage.load() : Stage::kExecute;
    const std::string report =
        "model '" + o.model + "' version " + std::to_string(o.version) +
        ": an execution of a batch of " + std::to_string(r.batch) + " in stage " +
        std::string(StageName(stage)) + " has run " + std::to_string(Millis(now - r.start)) +
        " ms, " + std::to_string(Millis(now - r.deadline)) + " ms past its deadline (worker " +
        std::to_string(w) + ")";
    const Status hung = DeadlineExceeded("the execution hung: " + report);
    if (r.execution) {
      for (Pending* p : r.pendings) {
        if (p->done) answers.push_back({p->ledger, std::move(p->done), hung});
      }
    } else {
      auto& active = s_.slots[w].active;
      for (auto& entry : active) {
        auto& p = entry.second;
        // One answered at its deadline already is not answered twice.
        if (p->done) answers.push_back({p->ledger, std::move(p->done), hung, std::move(p)});
      }
      s_.executing -= static_cast<int64_t>(active.size());
      active.clear();
    }
    spdlog::error("watchdog: {}; its requests are answered 504 and the model is taken out of "
                  "service",
                  report);
    // Quarantine before the abort, so no new request reaches the instance being replaced.
    s_.breaker.Trip("watchdog: " + report, now);
    if (r.instance) r.instance->Abort();
    s_.finisher.CountWatchdogReport();
  }
}

void Watchdog::Loop(std::stop_token stop) {
  MutexLock lock(s_.mu);
  while (!stop.stop_requested()) {
    // Collect before computing the next wake-up: whatever is due now (at the thread's start,
    // or after a kick) is answered now, not a millisecond later (NextWatch's floor) — under a
    // clock that only a test moves, that millisecond would never come.
    const auto now = s_.Now();
    std::vector<Answer> answers;
    CollectDead(now, answers);
    CollectHung(now, answers);
    if (!answers.empty()) {
      WithLockReleased(lock, [&] {
        for (auto& a : answers) {
          s_.finisher.Finish(a.ledger, std::move(a.done), std::move(a.status));
        }
        answers.clear();  // destroys the requests it owns before the lock is taken again
        s_.cv.notify_all();
      });
      continue;
    }
    s_.watch_next = NextWatch(now);
    s_.watch_kick = false;
    WaitUntil(*s_.options.time, s_.watch_cv, lock, stop, s_.watch_next,
              [this]() REQUIRES(s_.mu) { return s_.watch_kick; });
  }
}

}  // namespace mmserve
