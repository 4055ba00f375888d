// The workers' execution loops: a batch-style worker takes up to max_batch requests (after
// waiting up to max_queue_delay for more), executes them as one batch and answers each; a
// continuous worker admits requests into its instance's free slots and steps every admitted
// sequence at once (a generator's token step). Both give way to more important models at the
// PriorityGate and restart an instance the watchdog aborted.
#include <sys/prctl.h>

#include <algorithm>
#include <utility>

#include "scheduler/model_scheduler.h"
#include "scheduler/model_scheduler_internal.h"

namespace mmserve {
namespace {

// The most answers a worker with nothing queued writes itself (MayAnswerHere): a bounded wait
// for a request that arrives meanwhile.
constexpr size_t kAnswerHereAtMost = kMaxBatchesPerCall;

}  // namespace

template <typename Pred>
bool ModelScheduler::WaitForWork(MutexLock& lock, std::stop_token stop,
                                 Instance& instance, Pred has_work) {
  const TimeSource& time = *options_.time;
  if (!WaitUntil(time, cv_, lock, stop, Now() + kParkAfter, has_work)) {
    if (stop.stop_requested()) return false;
    WithLockReleased(lock, [&] { instance.Park(); });
    const auto release = ReleaseAfterPark(instance);
    if (release && !WaitUntil(time, cv_, lock, stop, Now() + *release, has_work)) {
      if (stop.stop_requested()) return false;
      WithLockReleased(lock, [&] { instance.Release(); });
    }
    WaitUntil(time, cv_, lock, stop, Clock::time_point::max(), has_work);
  }
  return !stop.stop_requested();
}

bool ModelScheduler::AnotherBatchExecuting(int index) const {
  for (size_t w = 0; w < running_.size(); ++w) {
    if (static_cast<int>(w) != index && running_[w].active) return true;
  }
  return false;
}

bool ModelScheduler::WaitForBatch(MutexLock& lock, std::stop_token stop,
                                  int index) {
  const size_t max_batch = static_cast<size_t>(options_.max_batch);
  const auto full = [&]() REQUIRES(mu_) { return static_cast<size_t>(queued_) >= max_batch; };
  if (options_.max_queue_delay.count() > 0 && !full()) {
    Clock::time_point oldest = Clock::time_point::max();
    for (const auto& q : queues_) {
      if (!q.empty()) oldest = std::min(oldest, q.front()->ledger.enqueued);
    }
    const auto close = oldest + options_.max_queue_delay - window_lag_;
    if (close > Now() && !WaitUntil(*options_.time, cv_, lock, stop, close, full)) {
      // Timed out: learn how late the wake-up came (timer slack, the scheduler's latency).
      const auto late = std::clamp<Clock::duration>(Now() - close, Clock::duration(0),
                                                    options_.max_queue_delay / 4);
      window_lag_ += (late - window_lag_) / 8;
    }
  }
  if (options_.hold_partial_batches && !full() && AnotherBatchExecuting(index)) {
    cv_.wait(lock, stop, [&]() REQUIRES(mu_) { return full() || !AnotherBatchExecuting(index); });
  }
  return !stop.stop_requested() && queued_ > 0;
}

// Splits `items` into batches of at most `max_batch` (the engine's batch size; an instance
// that takes several per call still runs each on its own), each at its tier.
std::vector<Execution> ModelScheduler::SplitIntoBatches(BatchView items, size_t max_batch) const {
  // Made in place (an Execution holds an atomic): sized once, never moved.
  std::vector<Execution> batches((items.size() + max_batch - 1) / max_batch);
  for (size_t k = 0; k < batches.size(); ++k) {
    const size_t first = k * max_batch;
    batches[k].items = items.subspan(first, std::min(max_batch, items.size() - first));
    batches[k].tier = TierFor(batches[k].items.size());
  }
  return batches;
}

// A failed execution fails all its requests at once, and a lost worker every batch of the call:
// the breaker hears of it once (a crashed worker's 8 requests are not 8 failures).
void ModelScheduler::AnswerCall(const std::vector<std::unique_ptr<Pending>>& batch,
                                std::vector<InferCallback>& dones, std::vector<BatchItem>& items,
                                const std::vector<Status>& statuses, size_t max_batch,
                                Clock::time_point end) {
  bool failure_told = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!dones[i]) continue;  // the watchdog answered it
    const Status& status = statuses[i / max_batch];
    const bool overrun = end > batch[i]->deadline;
    const bool tell = overrun || status.ok() || batch[i]->ledger.ticket.probe ||
                      !std::exchange(failure_told, true);
    Finish(batch[i]->ledger, std::move(dones[i]),
           overrun       ? Overrun(*batch[i], end)
           : status.ok() ? std::move(items[i].result)
                         : Result<InferResponse>(status),
           tell);
  }
}

void ModelScheduler::BatchLoop(std::stop_token stop, int index,
                               std::unique_ptr<Instance> instance) {
  // A batch window of 1 ms should not end 50 us late: the kernel's default timer slack.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const size_t max_batch = static_cast<size_t>(options_.max_batch);
  Running& running = RunningSlot(index);
  MutexLock lock(mu_);
  while (instance) {
    if (!WaitForWork(lock, stop, *instance, [&]() REQUIRES(mu_) { return queued_ > 0; })) {
      return;
    }
    if (MustGiveWay()) {
      lock.unlock();
      instance->Park();
      GiveWay(index, stop);  // the requests stay queued (and batch up) meanwhile
      lock.lock();
      continue;
    }
    if (!WaitForBatch(lock, stop, index)) {
      if (stop.stop_requested()) return;
      continue;  // another worker took them
    }
    std::vector<std::pair<std::unique_ptr<Pending>, Status>> dead;
    const auto calls =
        static_cast<size_t>(std::clamp(instance->batches_per_call(), 1, kMaxBatchesPerCall));
    auto batch = TakeRequests(max_batch * calls, dead);
    const auto start = Now();
    running = Running{.active = true, .start = start, .deadline = Clock::time_point::min()};
    for (auto& p : batch) {
      p->ledger.started = start;
      running.deadline = std::max(running.deadline, p->deadline);
      running.pendings.push_back(p.get());
    }
    std::vector<BatchItem> items;
    // Made in place: a temporary BatchItem moved in trips GCC 12's maybe-uninitialized.
    items.resize(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) items[i].request = batch[i]->request.get();
    std::vector<Execution> executions = SplitIntoBatches(items, max_batch);
    running.execution = executions.empty() ? nullptr : &executions[0];
    running.batch = static_cast<int>(batch.size());
    running.instance = instance.get();
    if (batch.empty()) running.active = false;
    executing_ += static_cast<int64_t>(batch.size());
    lock.unlock();

    for (auto& [p, s] : dead) Finish(p->ledger, std::move(p->done), std::move(s));
    if (batch.empty()) {
      lock.lock();
      continue;
    }
    std::vector<Status> statuses(executions.size());
    instance->ExecuteEach(executions, statuses);  // by default, one Execute() per batch
    const auto end = Now();

    // Take back the callbacks the watchdog has not already answered.
    std::vector<InferCallback> dones(batch.size());
    lock.lock();
    const bool reported = running.reported;
    // With nothing queued, this worker would go idle: it may write the answers itself, a few
    // (a call of an isolated fast model carries several: docs/BENCHMARKS.md P10).
    const ScopedAnswerHere answer_here(batch.size() <= kAnswerHereAtMost && queued_ == 0 &&
                                       !reported);
    for (size_t i = 0; i < batch.size(); ++i) dones[i] = std::move(batch[i]->done);
    running = Running{};
    executing_ -= static_cast<int64_t>(batch.size());
    lock.unlock();
    if (options_.hold_partial_batches) cv_.notify_all();  // a held worker may go now

    const auto each = (end - start) / static_cast<int64_t>(executions.size());
    for (const Execution& e : executions) CountExecution(e, each);
    AnswerCall(batch, dones, items, statuses, max_batch, end);
    batch.clear();  // destroys the requests before the lock is taken again
    if (reported && instance->Abort()) instance = Restart(index, std::move(instance));
    lock.lock();
  }
}

void ModelScheduler::OnContinuousDone(int worker, Pending* p, Result<InferResponse> result) {
  std::unique_ptr<Pending> owned;
  {
    MutexLock lock(mu_);
    auto& active = active_[static_cast<size_t>(worker)];
    auto it = active.find(p);
    if (it == active.end()) return;  // the watchdog answered it already
    owned = std::move(it->second);
    active.erase(it);
    --executing_;
  }
  if (!owned->done) {  // answered at its deadline by the watchdog; this result is discarded
    cv_.notify_all();
    return;
  }
  {
    MutexLock lock(stats_mu_);
    ++stats_.inference_count;
  }
  Finish(owned->ledger, std::move(owned->done), std::move(result));
  cv_.notify_all();  // a slot is free
}

void ModelScheduler::ContinuousLoop(std::stop_token stop, int index,
                                    std::unique_ptr<Instance> base) {
  auto* instance = static_cast<ContinuousInstance*>(base.get());
  Running& running = RunningSlot(index);
  auto& active = ActiveSlot(index);
  while (instance) {
    std::vector<std::pair<std::unique_ptr<Pending>, Status>> dead;
    std::vector<std::unique_ptr<InferRequest>> admitted;
    int sequences = 0;
    {
      MutexLock lock(mu_);
      if (!WaitForWork(lock, stop, *instance, [&]() REQUIRES(mu_) {
            return !instance->idle() || (queued_ > 0 && instance->free_slots() > 0);
          })) {
        break;
      }
      auto taken =
          TakeRequests(static_cast<size_t>(std::max(0, instance->free_slots())), dead);
      const auto now = Now();
      for (auto& p : taken) {
        p->ledger.started = now;
        auto request = std::move(p->request);
        // The instance completes the request through this; the Pending stays here.
        request->done = [this, index, raw = p.get()](Result<InferResponse> result) {
          OnContinuousDone(index, raw, std::move(result));
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
        active.emplace(p.get(), std::move(p));
        ++executing_;
      }
      // A step takes milliseconds: the watchdog reports how long the oldest sequence has run.
      running = Running{.active = true, .start = now, .deadline = Clock::time_point::min()};
      for (const auto& [raw, p] : active) {
        running.deadline = std::max(running.deadline, p->deadline);
        running.start = std::min(running.start, p->ledger.started);
      }
      running.batch = static_cast<int>(active.size());
      running.instance = instance;
      sequences = running.batch;
    }
    for (auto& [p, s] : dead) Finish(p->ledger, std::move(p->done), std::move(s));
    for (auto& r : admitted) instance->Admit(std::move(r));
    if (!instance->idle() && MustGiveWay()) {
      instance->Park();
      GiveWay(index, stop);
    }
    if (!instance->idle()) {
      // Measured, not decided on: the clock itself (common/clock.h).
      const auto start = Clock::now();
      instance->Step();
      MutexLock stats_lock(stats_mu_);
      ++stats_.execution_count;
      BatchStats& b = stats_.batches[sequences];
      ++b.executions;
      b.compute_ns += Nanos(Clock::now() - start);
    }
    bool reported;
    {
      MutexLock lock(mu_);
      reported = running.reported;
      running = Running{};
    }
    if (reported && instance->Abort()) {
      instance->CancelAll(Unavailable("the instance was aborted by the watchdog"));
      base = Restart(index, std::move(base));
      instance = static_cast<ContinuousInstance*>(base.get());
    }
  }
  if (instance) instance->CancelAll(Unavailable("model '" + options_.model + "' was unloaded"));
}

void ModelScheduler::CountExecution(const Execution& execution, Clock::duration took) {
  MutexLock lock(stats_mu_);
  ++stats_.execution_count;
  stats_.inference_count += static_cast<int64_t>(execution.items.size());
  BatchStats& b = stats_.batches[execution.tier];
  ++b.executions;
  b.compute_ns += Nanos(took);
}

}  // namespace mmserve
