// The scheduler's watchdog thread: it wakes at the next deadline (or a hang report due) and
// answers 504 then: queued requests, executing batches and generations' sequences past their
// deadline; an execution still running watchdog_margin past its deadline is reported once, the
// breaker opened and the instance aborted (model_scheduler.h).
#include <algorithm>

#include "common/logging.h"
#include "scheduler/model_scheduler.h"
#include "scheduler/model_scheduler_internal.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;

// The watchdog wakes at the next deadline or report due, and at least this often.
constexpr auto kWatchCap = 100ms;

}  // namespace

Clock::time_point ModelScheduler::NextWatch(Clock::time_point now) const {
  // A client that leaves while queued is noticed within kWatchCap.
  Clock::time_point next = now + kWatchCap;
  for (const auto& queue : queues_) {
    for (const auto& p : queue) next = std::min(next, p->deadline);
  }
  for (const Running& r : running_) {
    if (!r.active) continue;
    for (const Pending* p : r.pendings) {
      if (p->done) next = std::min(next, p->deadline);
    }
    if (!r.reported && !r.paused && r.deadline != Clock::time_point::min()) {
      next = std::min(next, r.deadline + r.paused_for + options_.watchdog_margin);
    }
  }
  // Continuous: the sequences, each answered at its own deadline.
  for (const auto& active : active_) {
    for (const auto& [raw, p] : active) {
      if (p->done) next = std::min(next, p->deadline);
    }
  }
  return std::max(next, now + 1ms);
}

void ModelScheduler::CollectDead(Clock::time_point now, std::vector<Answer>& answers) {
  for (auto& queue : queues_) {
    for (auto it = queue.begin(); it != queue.end();) {
      if (Status s = DeadOutcome(**it, now); !s.ok()) {
        answers.push_back({(*it)->ledger, std::move((*it)->done), std::move(s), std::move(*it)});
        it = queue.erase(it);
        --queued_;
      } else {
        ++it;
      }
    }
  }
  // Executing requests whose deadline passed are answered now; the execution goes on, and its
  // result for them is discarded.
  for (Running& r : running_) {
    if (!r.active) continue;
    for (Pending* p : r.pendings) {
      if (!p->done || p->deadline > now) continue;
      answers.push_back({p->ledger, std::move(p->done), Overrun(*p, now)});
    }
  }
  // Sequences of a continuous instance likewise, at their deadline rather than at the step
  // after it (a step may take hundreds of ms on a loaded machine). The Pending stays until the
  // instance completes the sequence, so that its pointer is never reused meanwhile.
  for (auto& active : active_) {
    for (auto& [raw, p] : active) {
      if (!p->done || p->deadline > now) continue;
      if (p->partials) {
        MutexLock gate_lock(p->partials->mu);
        p->partials->closed = true;
      }
      answers.push_back({p->ledger, std::move(p->done), Overrun(*p, now)});
    }
  }
}

Status ModelScheduler::Overrun(const Pending& p, Clock::time_point now) const {
  return DeadlineExceeded(
      "request to '" + options_.model + "' timed out: its execution ran past the request's " +
      std::to_string(Millis(p.deadline - p.arrival)) + " ms deadline (" +
      std::to_string(Millis(now - p.ledger.started)) + " ms executing); its result is discarded");
}

void ModelScheduler::CollectHung(Clock::time_point now, std::vector<Answer>& answers) {
  for (size_t w = 0; w < running_.size(); ++w) {
    Running& r = running_[w];
    if (!r.active || r.reported || r.paused || r.deadline == Clock::time_point::min() ||
        now < r.deadline + r.paused_for + options_.watchdog_margin) {
      continue;
    }
    r.reported = true;
    const Stage stage = r.execution ? r.execution->stage.load() : Stage::kExecute;
    const std::string report =
        "model '" + options_.model + "' version " + std::to_string(options_.version) +
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
      for (auto& entry : active_[w]) {
        auto& p = entry.second;
        // One answered at its deadline already is not answered twice.
        if (p->done) answers.push_back({p->ledger, std::move(p->done), hung, std::move(p)});
      }
      executing_ -= static_cast<int64_t>(active_[w].size());
      active_[w].clear();
    }
    spdlog::error("watchdog: {}; its requests are answered 504 and the model is taken out of "
                  "service",
                  report);
    // Quarantine before the abort, so no new request reaches the instance being replaced.
    breaker_.Trip("watchdog: " + report, now);
    if (r.instance) r.instance->Abort();
    MutexLock stats_lock(stats_mu_);
    ++stats_.watchdog_reports;
  }
}

void ModelScheduler::WatchdogLoop(std::stop_token stop) {
  MutexLock lock(mu_);
  while (!stop.stop_requested()) {
    // Collect before computing the next wake-up: whatever is due now (at the thread's start,
    // or after a kick) is answered now, not a millisecond later (NextWatch's floor) — under a
    // clock that only a test moves, that millisecond would never come.
    const auto now = Now();
    std::vector<Answer> answers;
    CollectDead(now, answers);
    CollectHung(now, answers);
    if (!answers.empty()) {
      lock.unlock();
      for (auto& a : answers) Finish(a.ledger, std::move(a.done), std::move(a.status));
      answers.clear();  // destroys the requests it owns before the lock is taken again
      cv_.notify_all();
      lock.lock();
      continue;
    }
    watch_next_ = NextWatch(now);
    watch_kick_ = false;
    WaitUntil(*options_.time, watch_cv_, lock, stop, watch_next_,
              [this]() REQUIRES(mu_) { return watch_kick_; });
  }
}

}  // namespace mmserve
