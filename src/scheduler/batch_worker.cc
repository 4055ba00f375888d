#include "scheduler/batch_worker.h"

#include <sys/prctl.h>

#include <algorithm>
#include <utility>

namespace mmserve {
namespace {

// The most answers a worker with nothing queued writes itself (MayAnswerHere): a bounded wait
// for a request that arrives meanwhile.
constexpr size_t kAnswerHereAtMost = kMaxBatchesPerCall;

int TierFor(size_t n, const std::vector<int>& tiers) {
  for (int tier : tiers) {
    if (static_cast<size_t>(tier) >= n) return tier;
  }
  return static_cast<int>(n);
}

}  // namespace

std::vector<Execution> SplitIntoBatches(BatchView items, size_t max_batch,
                                        const std::vector<int>& tiers) {
  // Made in place (an Execution holds an atomic): sized once, never moved.
  std::vector<Execution> batches((items.size() + max_batch - 1) / max_batch);
  for (size_t k = 0; k < batches.size(); ++k) {
    const size_t first = k * max_batch;
    batches[k].items = items.subspan(first, std::min(max_batch, items.size() - first));
    batches[k].tier = TierFor(batches[k].items.size(), tiers);
  }
  return batches;
}

void BatchWorker::Loop(std::stop_token stop, std::unique_ptr<Instance> instance) {
  // A batch window of 1 ms should not end 50 us late: the kernel's default timer slack.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  MutexLock lock(s_.mu);
  while (instance) {
    if (!WaitForWork(lock, stop, *instance,
                     [&]() REQUIRES(s_.mu) { return s_.queue.size() > 0; })) {
      return;
    }
    if (MustGiveWay()) {
      WithLockReleased(lock, [&] {
        instance->Park();
        GiveWay(stop);  // the requests stay queued (and batch up) meanwhile
      });
      continue;
    }
    if (!WaitForBatch(lock, stop)) {
      if (stop.stop_requested()) return;
      continue;  // another worker took them
    }
    Call call = TakeCall(*instance);
    WithLockReleased(lock, [&] { StartCall(call, *instance); });
    // An instance that splits its calls runs the next while this thread answers the last:
    // on two cores or more. On one, the answers and the next call only take turns, and the
    // calls get smaller (0.61x the unsplit rate, identity isolated, docs/BENCHMARKS.md #45).
    const bool splits = instance->starts_calls() && cores_ > 1;
    for (;;) {
      WithLockReleased(lock, [&] { FinishCall(call, *instance); });
      const bool next_started = splits && !reported_ && MayStartNext(stop);
      Call next = next_started ? TakeCall(*instance) : Call{};
      WithLockReleased(lock, [&] {
        if (next_started) StartCall(next, *instance);
        AnswerCall(call, next_started);
        call = Call{};  // destroys the requests before the lock is taken again
      });
      if (!next_started) break;
      call = std::move(next);
    }
    if (reported_) {
      if (stop.stop_requested()) return;  // unloading: no fresh instance to make
      WithLockReleased(lock, [&] {
        if (instance->Abort()) instance = Restart(std::move(instance));
      });
    }
  }
}

bool BatchWorker::AnotherBatchExecuting() const {
  for (size_t w = 0; w < s_.slots.size(); ++w) {
    if (static_cast<int>(w) != index_ && s_.slots[w].running.active) return true;
  }
  return false;
}

bool BatchWorker::WaitForBatch(MutexLock& lock, std::stop_token stop) {
  const ModelScheduler::Options& o = s_.options;
  const size_t max_batch = static_cast<size_t>(o.max_batch);
  const auto full = [&]() REQUIRES(s_.mu) {
    return static_cast<size_t>(s_.queue.size()) >= max_batch;
  };
  if (o.max_queue_delay.count() > 0 && !full()) {
    const auto close = s_.queue.OldestEnqueued() + o.max_queue_delay - window_lag_;
    if (close > Now() && !WaitUntil(*o.time, s_.cv, lock, stop, close, full)) {
      // Timed out: learn how late the wake-up came (timer slack, the scheduler's latency).
      const auto late = std::clamp<Clock::duration>(Now() - close, Clock::duration(0),
                                                    o.max_queue_delay / 4);
      window_lag_ += (late - window_lag_) / 8;
    }
  }
  if (o.hold_partial_batches && !full() && AnotherBatchExecuting()) {
    s_.cv.wait(lock, stop, [&]() REQUIRES(s_.mu) { return full() || !AnotherBatchExecuting(); });
  }
  return !stop.stop_requested() && s_.queue.size() > 0;
}

BatchWorker::Call BatchWorker::TakeCall(Instance& instance) {
  const size_t max_batch = static_cast<size_t>(s_.options.max_batch);
  const auto calls =
      static_cast<size_t>(std::clamp(instance.batches_per_call(), 1, kMaxBatchesPerCall));
  Call call;
  call.start = Now();
  call.batch = s_.queue.Take(max_batch * calls, call.start, call.dead);
  Running& running = s_.slots[static_cast<size_t>(index_)].running;
  running = Running{.active = !call.batch.empty(), .start = call.start,
                    .deadline = Clock::time_point::min()};
  // Made in place: a temporary BatchItem moved in trips GCC 12's maybe-uninitialized.
  call.items.resize(call.batch.size());
  for (size_t i = 0; i < call.batch.size(); ++i) {
    Pending& p = *call.batch[i];
    p.ledger.started = call.start;
    running.deadline = std::max(running.deadline, p.deadline);
    running.pendings.push_back(&p);
    call.items[i].request = p.request.get();
  }
  // The executions point into `items`, and the watchdog into `executions`: both vectors keep
  // their buffers when the call is moved.
  call.executions = SplitIntoBatches(call.items, max_batch, s_.options.batch_tiers);
  running.execution = call.executions.empty() ? nullptr : &call.executions[0];
  running.batch = static_cast<int>(call.batch.size());
  running.instance = &instance;
  s_.executing += static_cast<int64_t>(call.batch.size());
  return call;
}

bool BatchWorker::MayStartNext(std::stop_token stop) const {
  const ModelScheduler::Options& o = s_.options;
  const size_t queued = static_cast<size_t>(s_.queue.size());
  if (stop.stop_requested() || queued == 0 || MustGiveWay()) return false;
  // A partial batch would wait for its window to close, or for another worker's batch.
  return queued >= static_cast<size_t>(o.max_batch) ||
         (o.max_queue_delay.count() == 0 && !o.hold_partial_batches);
}

void BatchWorker::StartCall(Call& call, Instance& instance) {
  reported_ = false;
  for (auto& [p, status] : call.dead) {
    s_.finisher.Finish(p->ledger, std::move(p->done), std::move(status));
  }
  call.dead.clear();
  if (!call.batch.empty()) instance.StartEach(call.executions);
}

void BatchWorker::FinishCall(Call& call, Instance& instance) {
  if (call.batch.empty()) return;
  call.statuses.resize(call.executions.size());
  instance.FinishEach(call.executions, call.statuses);  // by default, one Execute() per batch
  call.end = Now();
  // Take back the callbacks the watchdog has not already answered.
  call.dones.resize(call.batch.size());
  {
    MutexLock lock(s_.mu);
    Running& running = s_.slots[static_cast<size_t>(index_)].running;
    reported_ = running.reported;
    call.nothing_queued = s_.queue.size() == 0;
    for (size_t i = 0; i < call.batch.size(); ++i) call.dones[i] = std::move(call.batch[i]->done);
    running = Running{};
    s_.executing -= static_cast<int64_t>(call.batch.size());
  }
  if (s_.options.hold_partial_batches) s_.cv.notify_all();  // a held worker may go now
}

// A failed execution fails all its requests at once, and a lost worker every batch of the call:
// the breaker hears of it once (a crashed worker's 8 requests are not 8 failures).
void BatchWorker::AnswerCall(Call& call, bool next_started) {
  if (call.batch.empty()) return;
  // With nothing queued, this worker would go idle, and with the next call started it waits for
  // that call: either way it may write the answers itself, a few (a call of an isolated fast
  // model carries several: docs/BENCHMARKS.md P10).
  const ScopedAnswerHere answer_here(call.batch.size() <= kAnswerHereAtMost &&
                                     (call.nothing_queued || next_started) && !reported_);
  const auto each = (call.end - call.start) / static_cast<int64_t>(call.executions.size());
  for (const Execution& e : call.executions) s_.finisher.CountExecution(e, each);
  const auto& batch = call.batch;
  const size_t max_batch = static_cast<size_t>(s_.options.max_batch);
  bool failure_told = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!call.dones[i]) continue;  // the watchdog answered it
    const Status& status = call.statuses[i / max_batch];
    const bool overrun = call.end > batch[i]->deadline;
    const bool tell = overrun || status.ok() || batch[i]->ledger.ticket.probe ||
                      !std::exchange(failure_told, true);
    s_.finisher.Finish(batch[i]->ledger, std::move(call.dones[i]),
                       overrun       ? Overrun(model(), *batch[i], call.end)
                       : status.ok() ? std::move(call.items[i].result)
                                     : Result<InferResponse>(status),
                       tell);
  }
}

void InlineWorker::Run(std::unique_ptr<Pending> p) {
  const std::string& model = s_.options.model;
  const auto start = s_.Now();
  Result<InferResponse> result = [&]() -> Result<InferResponse> {
    if (Status dead = DeadOutcome(model, *p, start); !dead.ok()) return dead;
    p->ledger.started = start;
    BatchItem item{p->request.get()};
    Execution execution{.items = BatchView(&item, 1), .tier = 1};
    Status status = instance_->Execute(execution);
    const auto end = s_.Now();
    s_.finisher.CountExecution(execution, end - start);
    if (end > p->deadline) return Overrun(model, *p, end);
    return status.ok() ? std::move(item.result) : Result<InferResponse>(status);
  }();
  {
    MutexLock lock(s_.mu);
    --s_.executing;
  }
  s_.finisher.Finish(p->ledger, std::move(p->done), std::move(result));
}

}  // namespace mmserve
