#include "scheduler/worker.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/logging.h"

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

}  // namespace

Status Warmup(const ModelScheduler::Options& options, Session& session, Instance& instance) {
  std::vector<int> tiers = options.batch_tiers;
  if (tiers.empty()) tiers = {1};
  for (int tier : tiers) {
    for (int i = 0; i < options.warmup; ++i) {
      std::unique_ptr<InferRequest> request = session.WarmupRequest(tier);
      if (!request) return Status::Ok();  // the model has no way to be warmed
      request->deadline = options.time->Now() + 60s;
      Result<InferResponse> result = Internal("the warm-up execution gave no answer");
      if (session.style() == ExecutionStyle::kContinuous) {
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

Worker::~Worker() { Join(); }

void Worker::Start() {
  thread_ = std::jthread([this](std::stop_token stop) { Main(stop); });
}

void Worker::Join() {
  if (thread_.joinable()) thread_.join();
}

void Worker::Main(std::stop_token stop) {
  const ModelScheduler::Options& o = s_.options;
  const WorkerInfo info = SetUpWorkerThread(o, index_);
  cores_ = info.cores.size();
  s_.finisher.SetWorker(index_, info);
  auto instance = s_.session.CreateInstance(index_);
  if (instance.ok()) {
    if (Status warm = Warmup(o, s_.session, **instance); !warm.ok()) instance = warm;
  }
  {
    MutexLock lock(s_.mu);
    if (instance.ok()) {
      ++s_.instances_ready;
    } else if (s_.instance_error.ok()) {
      s_.instance_error =
          instance.status().WithContext("creating instance " + std::to_string(index_));
    }
  }
  s_.cv.notify_all();
  if (!instance.ok()) return;
  stop_ = stop;
  (*instance)->set_yield_point(this);
  Loop(stop, std::move(*instance));
}

std::unique_ptr<Instance> Worker::Restart(std::unique_ptr<Instance> instance) {
  instance.reset();
  auto fresh = s_.session.CreateInstance(index_);
  if (!fresh.ok()) {
    spdlog::error("model {} worker {}: cannot replace the aborted instance: {}; the worker stops",
                  model(), index_, fresh.status().ToString());
    return nullptr;
  }
  (*fresh)->set_yield_point(this);
  spdlog::info("model {} worker {}: instance replaced after the watchdog report", model(),
               index_);
  s_.options.on_event("worker_restarted", "worker " + std::to_string(index_) +
                                              ": instance replaced after the watchdog report");
  s_.finisher.CountRestart(index_);
  return std::move(*fresh);
}

bool Worker::MayYield() const {
  const ModelScheduler::Options& o = s_.options;
  return o.gate && o.gate->MayYield(o.default_priority);
}

bool Worker::MustGiveWay() const {
  const ModelScheduler::Options& o = s_.options;
  return o.gate && o.gate->MustYield(o.default_priority);
}

void Worker::GiveWay(std::stop_token stop) {
  if (!MustGiveWay()) return;
  Clock::time_point until = Clock::time_point::max();
  {
    MutexLock lock(s_.mu);
    Running& running = s_.slots[static_cast<size_t>(index_)].running;
    if (running.active) {
      running.paused = true;
      until = running.deadline;  // then it runs to the end, late rather than never
    }
  }
  const ModelScheduler::Options& o = s_.options;
  const Clock::duration waited = o.gate->Wait(o.default_priority, until, stop);
  {
    MutexLock lock(s_.mu);
    Running& running = s_.slots[static_cast<size_t>(index_)].running;
    running.paused = false;
    running.paused_for += waited;
  }
  s_.finisher.CountYield(waited);
}

}  // namespace mmserve
