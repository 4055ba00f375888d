#include "scheduler/model_scheduler.h"

#include <algorithm>

#include "scheduler/batch_worker.h"
#include "scheduler/continuous_worker.h"
#include "scheduler/finisher.h"
#include "scheduler/watchdog.h"
#include "scheduler/worker.h"

namespace mmserve {

int LevelOf(const InferRequest& request, int default_level) {
  return request.priority >= 1 && request.priority <= kMaxPriorityLevel ? request.priority
                                                                         : default_level;
}

Clock::time_point DeadlineFor(const InferRequest& request,
                              const std::array<LevelPolicy, kMaxPriorityLevel + 1>& levels,
                              int level) {
  return std::min(request.deadline,
                  request.arrival + levels[static_cast<size_t>(level)].timeout);
}

std::array<LevelPolicy, kMaxPriorityLevel + 1> ModelScheduler::Levels(
    const QueueConfig& queue, std::chrono::milliseconds timeout) {
  std::array<LevelPolicy, kMaxPriorityLevel + 1> levels;
  for (auto& l : levels) l = {.max_size = queue.max_size, .timeout = timeout};
  for (const auto& [level, policy] : queue.levels) levels[static_cast<size_t>(level)] = policy;
  return levels;
}

namespace {
// Inline mode has no workers; events go nowhere unless someone listens.
ModelScheduler::Options Completed(ModelScheduler::Options o) {
  if (o.execute_inline) o.thread_num = 0;
  if (!o.on_event) o.on_event = [](std::string, std::string) {};
  return o;
}
}  // namespace

ModelScheduler::ModelScheduler(Options options, Session& session)
    : options_(Completed(std::move(options))),
      session_(session),
      breaker_(options_.model, options_.breaker,
               [this](CircuitBreaker::State to, const std::string& why) {
                 options_.on_event("breaker_" + std::string(BreakerStateName(to)), why);
               }),
      finisher_(std::make_unique<Finisher>(options_, breaker_)),
      state_(std::make_unique<SchedulerState>(options_, session_, breaker_, *finisher_)) {
  if (options_.gate) options_.gate->AddModel(options_.default_priority);
}

Result<std::unique_ptr<ModelScheduler>> ModelScheduler::Create(Options options,
                                                              Session& session) {
  std::unique_ptr<ModelScheduler> s(new ModelScheduler(std::move(options), session));
  const Options& o = s->options_;
  if (o.execute_inline) {
    if (!session.executes_inline() || o.max_batch != 1) {
      return FailedPrecondition("model '" + o.model +
                                "' cannot execute inline: its backend runs it on workers only, "
                                "or it batches");
    }
    auto instance = session.CreateInstance(0);
    if (!instance.ok()) return instance.status().WithContext("creating the inline instance");
    MMS_RETURN_IF_ERROR(Warmup(o, session, **instance));
    s->inline_ = std::make_unique<InlineWorker>(*s->state_, std::move(*instance));
    return s;
  }
  for (int i = 0; i < o.thread_num; ++i) {
    if (session.style() == ExecutionStyle::kContinuous) {
      s->workers_.push_back(std::make_unique<ContinuousWorker>(*s->state_, i));
    } else {
      s->workers_.push_back(std::make_unique<BatchWorker>(*s->state_, i));
    }
    s->workers_.back()->Start();
  }
  s->watchdog_ = std::make_unique<Watchdog>(*s->state_);
  SchedulerState& state = *s->state_;
  MutexLock lock(state.mu);
  state.cv.wait(lock, [&]() REQUIRES(state.mu) {
    return state.instances_ready == o.thread_num || !state.instance_error.ok();
  });
  if (!state.instance_error.ok()) {
    Status error = state.instance_error;
    lock.unlock();
    s.reset();  // stops and joins the workers that did start
    return error;
  }
  return s;
}

ModelScheduler::~ModelScheduler() {
  for (auto& w : workers_) w->RequestStop();
  session_.Interrupt();
  for (auto& w : workers_) w->Join();  // continuous instances cancel what they hold on the way
  watchdog_.reset();
  std::vector<std::unique_ptr<Pending>> left;
  {
    MutexLock lock(state_->mu);
    left = state_->queue.TakeAll();
  }
  for (auto& p : left) {
    finisher_->Finish(p->ledger, std::move(p->done),
                      Unavailable("model '" + options_.model + "' was unloaded"));
  }
  if (options_.gate) options_.gate->RemoveModel(options_.default_priority);
  if (options_.on_retired) options_.on_retired(stats());
}

Status ModelScheduler::Enqueue(std::unique_ptr<InferRequest> request) {
  const auto now = state_->Now();
  auto p = std::make_unique<Pending>();
  p->level = LevelOf(*request, options_.default_priority);
  request->deadline = DeadlineFor(*request, options_.levels, p->level);
  p->deadline = request->deadline;
  p->arrival = request->arrival;
  p->ledger.enqueued = now;
  p->done = std::move(request->done);
  p->request = std::move(request);

  Status status = breaker_.Admit(now, p->ledger.ticket);
  if (status.ok()) {
    SchedulerState& state = *state_;
    MutexLock lock(state.mu);
    if (!options_.execute_inline) {
      const Clock::time_point deadline = p->deadline;
      status = state.queue.Push(p);
      if (status.ok() && deadline < state.watch_next) {
        state.watch_kick = true;
        state.watch_cv.notify_one();
      }
    } else if (status = state.queue.CheckOpen(); status.ok()) {
      p->ledger.seq = state.queue.NextSeq();
      ++state.executing;
    }
    if (status.ok() && options_.gate) options_.gate->Enter(options_.default_priority);
  }
  if (!status.ok()) {
    finisher_->Reject(p->ledger.ticket, p->done, status);
    return status;
  }
  if (options_.execute_inline) {
    inline_->Run(std::move(p));
  } else {
    state_->cv.notify_one();
  }
  return Status::Ok();
}

void ModelScheduler::StopAccepting() {
  MutexLock lock(state_->mu);
  state_->queue.Close();
}

int64_t ModelScheduler::queued() const {
  MutexLock lock(state_->mu);
  return state_->queue.size();
}

int64_t ModelScheduler::executing() const {
  MutexLock lock(state_->mu);
  return state_->executing;
}

SchedulerStats ModelScheduler::stats() const {
  SchedulerStats s = finisher_->stats();
  {
    MutexLock lock(state_->mu);
    for (int l = 1; l <= kMaxPriorityLevel; ++l) s.queued[static_cast<size_t>(l)] = state_->queue.size(l);
    s.executing = state_->executing;
  }
  s.breaker = breaker_.state();
  s.breaker_reason = breaker_.reason();
  s.breaker_opened = breaker_.times_opened();
  return s;
}

}  // namespace mmserve
