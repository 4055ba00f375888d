#include "scheduler/model_scheduler.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "common/logging.h"
#include "scheduler/model_scheduler_internal.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;

// Pins and renices the calling thread, then reads back what it really got.
WorkerInfo SetUpWorkerThread(const ModelScheduler::Options& o, int index) {
  WorkerInfo info{.index = index, .tid = ::gettid()};
  if (!o.cpu_affinity.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : o.cpu_affinity) CPU_SET(c, &set);
    if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); rc != 0) {
      spdlog::warn("model {} worker {}: pthread_setaffinity_np failed with error {}", o.model,
                   index, rc);
    }
  }
  // On Linux the nice value belongs to the thread; threads it starts (the engine's compute
  // pool) inherit it.
  if (o.nice != 0 && ::setpriority(PRIO_PROCESS, static_cast<id_t>(info.tid), o.nice) != 0) {
    spdlog::warn("model {} worker {}: setpriority({}) failed", o.model, index, o.nice);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) info.cores.push_back(c);
    }
  }
  errno = 0;
  info.nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(info.tid));
  return info;
}

CircuitBreaker::Outcome OutcomeOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
    // The model answered; the request was at fault.
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists:
      return CircuitBreaker::Outcome::kSuccess;
    case StatusCode::kCancelled:
    case StatusCode::kResourceExhausted:  // a limit of the request's (context length, queue)
      return CircuitBreaker::Outcome::kNeutral;
    case StatusCode::kDeadlineExceeded:
      return CircuitBreaker::Outcome::kTimeout;
    default:
      return CircuitBreaker::Outcome::kFailure;
  }
}

}  // namespace

// The yield point a worker hands its instance: GiveWay() on that worker's thread.
class ModelScheduler::Yielder final : public YieldPoint {
 public:
  Yielder(ModelScheduler& s, int index) : s_(s), index_(index) {}
  void set_stop(std::stop_token stop) { stop_ = std::move(stop); }
  bool MayYield() const override {
    return s_.options_.gate && s_.options_.gate->MayYield(s_.options_.default_priority);
  }
  bool ShouldYield() const override { return s_.MustGiveWay(); }
  void Yield() override { s_.GiveWay(index_, stop_); }

 private:
  ModelScheduler& s_;
  const int index_;
  std::stop_token stop_;  // the worker's; set on its thread before its first execution
};

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
      running_(static_cast<size_t>(options_.thread_num)),
      active_(static_cast<size_t>(options_.thread_num)) {
  stats_.workers.resize(static_cast<size_t>(options_.thread_num));
  for (int i = 0; i < options_.thread_num; ++i) yielders_.push_back(std::make_unique<Yielder>(*this, i));
  if (options_.gate) options_.gate->AddModel(options_.default_priority);
}

Result<std::unique_ptr<ModelScheduler>> ModelScheduler::Create(Options options,
                                                              Session& session) {
  std::unique_ptr<ModelScheduler> s(new ModelScheduler(std::move(options), session));
  if (s->options_.execute_inline) {
    if (!session.executes_inline() || s->options_.max_batch != 1) {
      return FailedPrecondition("model '" + s->options_.model +
                                "' cannot execute inline: its backend runs it on workers only, "
                                "or it batches");
    }
    auto instance = session.CreateInstance(0);
    if (!instance.ok()) return instance.status().WithContext("creating the inline instance");
    MMS_RETURN_IF_ERROR(s->Warmup(**instance));
    s->inline_instance_ = std::move(*instance);
    return s;
  }
  for (int i = 0; i < s->options_.thread_num; ++i) {
    s->workers_.emplace_back([p = s.get(), i](std::stop_token stop) { p->WorkerLoop(stop, i); });
  }
  s->watchdog_ = std::jthread([p = s.get()](std::stop_token stop) { p->WatchdogLoop(stop); });
  MutexLock lock(s->mu_);
  s->cv_.wait(lock, [&]() REQUIRES(s->mu_) {
    return s->instances_ready_ == s->options_.thread_num || !s->instance_error_.ok();
  });
  if (!s->instance_error_.ok()) {
    Status error = s->instance_error_;
    lock.unlock();
    s.reset();  // stops and joins the workers that did start
    return error;
  }
  return s;
}

ModelScheduler::~ModelScheduler() {
  for (auto& w : workers_) w.request_stop();
  watchdog_.request_stop();
  session_.Interrupt();
  workers_.clear();  // joins; continuous instances cancel what they hold on the way out
  watchdog_ = std::jthread();
  std::vector<std::unique_ptr<Pending>> left;
  {
    MutexLock lock(mu_);
    for (auto& q : queues_) {
      for (auto& p : q) left.push_back(std::move(p));
      q.clear();
    }
    queued_ = 0;
  }
  std::sort(left.begin(), left.end(),
            [](const auto& a, const auto& b) { return a->ledger.seq < b->ledger.seq; });
  for (auto& p : left) {
    Finish(p->ledger, std::move(p->done), Unavailable("model '" + options_.model + "' was unloaded"));
  }
  if (options_.gate) options_.gate->RemoveModel(options_.default_priority);
  if (options_.on_retired) options_.on_retired(stats());
}

Status ModelScheduler::Enqueue(std::unique_ptr<InferRequest> request) {
  const auto now = Now();
  auto p = std::make_unique<Pending>();
  p->level = LevelOf(*request, options_.default_priority);
  const LevelPolicy& policy = options_.levels[static_cast<size_t>(p->level)];
  request->deadline = DeadlineFor(*request, options_.levels, p->level);
  p->deadline = request->deadline;
  p->arrival = request->arrival;
  p->ledger.enqueued = now;
  p->done = std::move(request->done);
  p->request = std::move(request);

  Status rejected = breaker_.Admit(now, p->ledger.ticket);
  if (rejected.ok()) {
    MutexLock lock(mu_);
    auto& queue = queues_[static_cast<size_t>(p->level)];
    if (!accepting_) {
      rejected = Unavailable("model '" + options_.model + "' is shutting down");
    } else if (options_.execute_inline) {
      p->ledger.seq = next_seq_++;
      ++executing_;
      if (options_.gate) options_.gate->Enter(options_.default_priority);
    } else if (static_cast<int64_t>(queue.size()) >= policy.max_size) {
      rejected = ResourceExhausted("model '" + options_.model + "' queue for priority level " +
                                   std::to_string(p->level) + " is full (" +
                                   std::to_string(policy.max_size) + " requests)");
    } else {
      p->ledger.seq = next_seq_++;
      if (p->deadline < watch_next_) {
        watch_kick_ = true;
        watch_cv_.notify_one();
      }
      queue.push_back(std::move(p));
      ++queued_;
      if (options_.gate) options_.gate->Enter(options_.default_priority);
    }
  }
  if (!rejected.ok()) {
    if (p->ledger.ticket.probe) {
      breaker_.Record(p->ledger.ticket, CircuitBreaker::Outcome::kNeutral, "", now);
    }
    {
      MutexLock lock(stats_mu_);
      ++stats_.rejected;
    }
    if (p->done) p->done(rejected);
    return rejected;
  }
  if (options_.execute_inline) {
    ExecuteInline(std::move(p));
    return Status::Ok();
  }
  cv_.notify_one();
  return Status::Ok();
}

void ModelScheduler::ExecuteInline(std::unique_ptr<Pending> p) {
  const auto start = Now();
  Result<InferResponse> result = [&]() -> Result<InferResponse> {
    if (Status dead = DeadOutcome(*p, start); !dead.ok()) return dead;
    p->ledger.started = start;
    BatchItem item{p->request.get()};
    Execution execution{.items = BatchView(&item, 1), .tier = 1};
    Status status = inline_instance_->Execute(execution);
    const auto end = Now();
    CountExecution(execution, end - start);
    if (end > p->deadline) return Overrun(*p, end);
    return status.ok() ? std::move(item.result) : Result<InferResponse>(status);
  }();
  {
    MutexLock lock(mu_);
    --executing_;
  }
  Finish(p->ledger, std::move(p->done), std::move(result));
}

void ModelScheduler::StopAccepting() {
  MutexLock lock(mu_);
  accepting_ = false;
}

int64_t ModelScheduler::queued() const {
  MutexLock lock(mu_);
  return queued_;
}

int64_t ModelScheduler::executing() const {
  MutexLock lock(mu_);
  return executing_;
}

SchedulerStats ModelScheduler::stats() const {
  SchedulerStats s;
  {
    MutexLock lock(stats_mu_);
    s = stats_;
  }
  {
    MutexLock lock(mu_);
    for (size_t l = 1; l < queues_.size(); ++l) s.queued[l] = static_cast<int64_t>(queues_[l].size());
    s.executing = executing_;
  }
  s.breaker = breaker_.state();
  s.breaker_reason = breaker_.reason();
  s.breaker_opened = breaker_.times_opened();
  return s;
}

int ModelScheduler::TierFor(size_t n) const {
  for (int tier : options_.batch_tiers) {
    if (static_cast<size_t>(tier) >= n) return tier;
  }
  return static_cast<int>(n);
}

Status ModelScheduler::DeadOutcome(const Pending& p, Clock::time_point now) const {
  if (p.deadline <= now) {
    return DeadlineExceeded("request to '" + options_.model + "' expired after " +
                            std::to_string(Millis(now - p.request->arrival)) +
                            " ms in the queue; it was not executed");
  }
  if (p.request->cancelled && p.request->cancelled()) {
    return Cancelled("the request to '" + options_.model +
                     "' was cancelled while queued; it was not executed");
  }
  return Status::Ok();
}

std::vector<std::unique_ptr<ModelScheduler::Pending>> ModelScheduler::TakeRequests(
    size_t n, std::vector<std::pair<std::unique_ptr<Pending>, Status>>& dead) {
  std::vector<std::unique_ptr<Pending>> batch;
  const auto now = Now();
  for (size_t level = 1; level < queues_.size() && batch.size() < n; ++level) {
    auto& queue = queues_[level];
    while (!queue.empty() && batch.size() < n) {
      auto p = std::move(queue.front());
      queue.pop_front();
      --queued_;
      if (Status s = DeadOutcome(*p, now); !s.ok()) {
        dead.emplace_back(std::move(p), std::move(s));
      } else {
        batch.push_back(std::move(p));
      }
    }
  }
  return batch;
}

void ModelScheduler::Finish(const Ledger& p, InferCallback done, Result<InferResponse> result,
                            bool breaker) {
  if (options_.gate) options_.gate->Leave(options_.default_priority);
  const auto now = Now();
  const Status& status = result.status();
  std::string what;
  if (!status.ok()) what = std::string(StatusCodeName(status.code())) + ": " + std::string(status.message());
  const bool executed = p.started != Clock::time_point();
  const CircuitBreaker::Outcome outcome = OutcomeOf(status);
  // A request that expired in the queue says the model is busy, not that it is broken.
  breaker_.Record(p.ticket,
                  executed && breaker ? outcome : CircuitBreaker::Outcome::kNeutral, what, now);
  {
    MutexLock lock(stats_mu_);
    const int64_t took = Nanos(now - p.enqueued);
    if (status.ok()) {
      ++stats_.success;
      stats_.success_ns += took;
    } else if (!executed && status.code() == StatusCode::kDeadlineExceeded) {
      ++stats_.expired;
      stats_.fail_ns += took;
    } else if (status.code() == StatusCode::kCancelled) {
      ++stats_.cancelled;
    } else if (outcome == CircuitBreaker::Outcome::kFailure ||
               outcome == CircuitBreaker::Outcome::kTimeout) {
      ++stats_.failure;
      stats_.fail_ns += took;
    } else {
      ++stats_.success;  // answered, with the request's own error
      stats_.success_ns += took;
    }
    if (status.code() != StatusCode::kCancelled) stats_.request_latency.Record(took);
    if (executed) {
      const int64_t queued = Nanos(p.started - p.enqueued);
      const int64_t computed = Nanos(now - p.started);
      if (result.ok()) {
        result->queue_ns = queued;
        result->compute_ns = computed;
      }
      stats_.queue_latency.Record(queued);
      stats_.compute_latency.Record(computed);
    }
  }
  Deliver(p.seq, std::move(done), std::move(result));
}

void ModelScheduler::Deliver(uint64_t seq, InferCallback done, Result<InferResponse> result) {
  if (!options_.preserve_ordering) {
    if (done) done(std::move(result));
    return;
  }
  // Hold it until every earlier request has been delivered. Callbacks run under order_mu_ so
  // that two threads cannot overtake each other between the check and the call.
  MutexLock lock(order_mu_);
  held_.emplace(seq, std::make_pair(std::move(done), std::move(result)));
  while (!held_.empty() && held_.begin()->first == next_deliver_) {
    auto node = held_.extract(held_.begin());
    if (node.mapped().first) node.mapped().first(std::move(node.mapped().second));
    ++next_deliver_;
  }
}

void ModelScheduler::WorkerLoop(std::stop_token stop, int index) {
  WorkerInfo info = SetUpWorkerThread(options_, index);
  auto instance = session_.CreateInstance(index);
  if (instance.ok()) {
    if (Status warm = Warmup(**instance); !warm.ok()) instance = warm;
  }
  {
    MutexLock lock(stats_mu_);
    stats_.workers[static_cast<size_t>(index)] = info;
  }
  {
    MutexLock lock(mu_);
    if (instance.ok()) {
      ++instances_ready_;
    } else if (instance_error_.ok()) {
      instance_error_ = instance.status().WithContext("creating instance " + std::to_string(index));
    }
  }
  cv_.notify_all();
  if (!instance.ok()) return;
  yielders_[static_cast<size_t>(index)]->set_stop(stop);
  (*instance)->set_yield_point(yielders_[static_cast<size_t>(index)].get());
  if (session_.style() == ExecutionStyle::kContinuous) {
    return ContinuousLoop(stop, index, std::move(*instance));
  }
  BatchLoop(stop, index, std::move(*instance));
}

std::unique_ptr<Instance> ModelScheduler::Restart(int index, std::unique_ptr<Instance> instance) {
  instance.reset();
  auto fresh = session_.CreateInstance(index);
  if (!fresh.ok()) {
    spdlog::error("model {} worker {}: cannot replace the aborted instance: {}; the worker stops",
                  options_.model, index, fresh.status().ToString());
    return nullptr;
  }
  (*fresh)->set_yield_point(yielders_[static_cast<size_t>(index)].get());
  spdlog::info("model {} worker {}: instance replaced after the watchdog report", options_.model,
               index);
  options_.on_event("worker_restarted", "worker " + std::to_string(index) +
                                            ": instance replaced after the watchdog report");
  MutexLock lock(stats_mu_);
  ++stats_.workers[static_cast<size_t>(index)].restarts;
  return std::move(*fresh);
}

Status ModelScheduler::Warmup(Instance& instance) {
  std::vector<int> tiers = options_.batch_tiers;
  if (tiers.empty()) tiers = {1};
  for (int tier : tiers) {
    for (int i = 0; i < options_.warmup; ++i) {
      std::unique_ptr<InferRequest> request = session_.WarmupRequest(tier);
      if (!request) return Status::Ok();  // the model has no way to be warmed
      request->deadline = Now() + 60s;
      Result<InferResponse> result = Internal("the warm-up execution gave no answer");
      if (session_.style() == ExecutionStyle::kContinuous) {
        auto& continuous = static_cast<ContinuousInstance&>(instance);
        request->done = [&result](Result<InferResponse> r) { result = std::move(r); };
        continuous.Admit(std::move(request));
        while (!continuous.idle()) continuous.Step();
      } else {
        BatchItem item{request.get()};
        Execution execution{.items = BatchView(&item, 1), .tier = tier};
        const Status status = instance.Execute(execution);
        result = status.ok() ? std::move(item.result) : Result<InferResponse>(status);
      }
      if (!result.ok()) {
        return result.status().WithContext("warm-up execution at batch " + std::to_string(tier));
      }
    }
  }
  return Status::Ok();
}

bool ModelScheduler::MustGiveWay() const {
  return options_.gate && options_.gate->MustYield(options_.default_priority);
}

void ModelScheduler::GiveWay(int index, std::stop_token stop) {
  if (!MustGiveWay()) return;
  PriorityGate* gate = options_.gate;
  const int level = options_.default_priority;
  Running& running = RunningSlot(index);
  Clock::time_point until = Clock::time_point::max();
  {
    MutexLock lock(mu_);
    if (running.active) {
      running.paused = true;
      until = running.deadline;  // then it runs to the end, late rather than never
    }
  }
  const Clock::duration waited = gate->Wait(level, until, stop);
  {
    MutexLock lock(mu_);
    running.paused = false;
    running.paused_for += waited;
  }
  MutexLock lock(stats_mu_);
  ++stats_.yields;
  stats_.yield_ns += Nanos(waited);
}

}  // namespace mmserve
