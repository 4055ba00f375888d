#include "scheduler/continuous_worker.h"

#include <algorithm>

namespace mmserve {

std::vector<std::unique_ptr<InferRequest>> ContinuousWorker::TakeAdmitted(
    ContinuousInstance& instance, DeadRequests& dead, int& sequences) {
  WorkerSlot& slot = s_.slots[static_cast<size_t>(index_)];
  const auto now = Now();
  auto taken = s_.queue.Take(static_cast<size_t>(std::max(0, instance.free_slots())), now, dead);
  std::vector<std::unique_ptr<InferRequest>> admitted;
  for (auto& p : taken) {
    p->ledger.started = now;
    auto request = std::move(p->request);
    // The instance completes the request through this; the Pending stays in the slot.
    request->done = [this, raw = p.get()](Result<InferResponse> result) {
      OnDone(raw, std::move(result));
    };
    if (request->on_partial) {
      p->partials = std::make_shared<PartialGate>();
      request->on_partial = [gate = p->partials, inner = std::move(request->on_partial)](
                                const InferResponse& partial) {
        MutexLock gate_lock(gate->mu);
        return !gate->closed && inner(partial);
      };
    }
    admitted.push_back(std::move(request));
    slot.active.emplace(p.get(), std::move(p));
    ++s_.executing;
  }
  // A step takes milliseconds: the watchdog reports how long the oldest sequence has run.
  Running& running = slot.running;
  running = Running{.active = true, .start = now, .deadline = Clock::time_point::min()};
  for (const auto& [raw, p] : slot.active) {
    running.deadline = std::max(running.deadline, p->deadline);
    running.start = std::min(running.start, p->ledger.started);
  }
  running.batch = static_cast<int>(slot.active.size());
  running.instance = &instance;
  sequences = running.batch;
  return admitted;
}

void ContinuousWorker::OnDone(Pending* p, Result<InferResponse> result) {
  std::unique_ptr<Pending> owned;
  {
    MutexLock lock(s_.mu);
    auto& active = s_.slots[static_cast<size_t>(index_)].active;
    auto it = active.find(p);
    if (it == active.end()) return;  // the watchdog answered it already
    owned = std::move(it->second);
    active.erase(it);
    --s_.executing;
  }
  if (owned->done) {  // else answered at its deadline by the watchdog; this result is discarded
    s_.finisher.CountSequence();
    s_.finisher.Finish(owned->ledger, std::move(owned->done), std::move(result));
  }
  s_.cv.notify_all();  // a slot is free
}

void ContinuousWorker::Loop(std::stop_token stop, std::unique_ptr<Instance> base) {
  auto* instance = static_cast<ContinuousInstance*>(base.get());
  while (instance) {
    DeadRequests dead;
    std::vector<std::unique_ptr<InferRequest>> admitted;
    int sequences = 0;
    {
      MutexLock lock(s_.mu);
      if (!WaitForWork(lock, stop, *instance, [&]() REQUIRES(s_.mu) {
            return !instance->idle() || (s_.queue.size() > 0 && instance->free_slots() > 0);
          })) {
        break;
      }
      admitted = TakeAdmitted(*instance, dead, sequences);
    }
    for (auto& [p, s] : dead) s_.finisher.Finish(p->ledger, std::move(p->done), std::move(s));
    for (auto& r : admitted) instance->Admit(std::move(r));
    if (!instance->idle() && MustGiveWay()) {
      instance->Park();
      GiveWay(stop);
    }
    if (!instance->idle()) {
      // Measured, not decided on: the clock itself (common/clock.h).
      const auto start = Clock::now();
      instance->Step();
      s_.finisher.CountStep(sequences, Clock::now() - start);
    }
    bool reported;
    {
      MutexLock lock(s_.mu);
      Running& running = s_.slots[static_cast<size_t>(index_)].running;
      reported = running.reported;
      running = Running{};
    }
    if (reported && instance->Abort()) {
      instance->CancelAll(Unavailable("the instance was aborted by the watchdog"));
      if (stop.stop_requested()) return;  // unloading: no fresh instance to make
      base = Restart(std::move(base));
      instance = static_cast<ContinuousInstance*>(base.get());
    }
  }
  if (instance) instance->CancelAll(Unavailable("model '" + model() + "' was unloaded"));
}

}  // namespace mmserve
