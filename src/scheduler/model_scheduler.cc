#include "scheduler/model_scheduler.h"

#include <pthread.h>
#include <sched.h>

#include "common/logging.h"

namespace mmserve {
namespace {

Status PinCurrentThread(const std::vector<int>& cores) {
  if (cores.empty()) return Status::Ok();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); rc != 0) {
    return Internal("pthread_setaffinity_np failed with error " + std::to_string(rc));
  }
  return Status::Ok();
}

}  // namespace

ModelScheduler::ModelScheduler(Options options, Session& session)
    : options_(std::move(options)), session_(session) {}

Result<std::unique_ptr<ModelScheduler>> ModelScheduler::Create(Options options,
                                                              Session& session) {
  std::unique_ptr<ModelScheduler> s(new ModelScheduler(std::move(options), session));
  for (int i = 0; i < s->options_.thread_num; ++i) {
    s->workers_.emplace_back([p = s.get(), i](std::stop_token stop) { p->WorkerLoop(stop, i); });
  }
  std::unique_lock lock(s->mu_);
  s->cv_.wait(lock, [&] {
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
  session_.Interrupt();
  workers_.clear();  // joins
  std::deque<std::unique_ptr<InferRequest>> left;
  {
    std::lock_guard lock(mu_);
    left.swap(queue_);
  }
  for (auto& r : left) {
    Complete(std::move(r), Unavailable("model '" + options_.model + "' was unloaded"));
  }
}

Status ModelScheduler::Enqueue(std::unique_ptr<InferRequest> request) {
  Status rejected;
  {
    std::lock_guard lock(mu_);
    if (!accepting_) {
      rejected = Unavailable("model '" + options_.model + "' is shutting down");
    } else if (static_cast<int64_t>(queue_.size()) >= options_.max_queue_size) {
      rejected = ResourceExhausted("model '" + options_.model + "' queue is full (" +
                                   std::to_string(options_.max_queue_size) + " requests)");
    } else {
      queue_.push_back(std::move(request));
    }
  }
  if (!rejected.ok()) {
    Complete(std::move(request), rejected);
    return rejected;
  }
  cv_.notify_one();
  return Status::Ok();
}

void ModelScheduler::StopAccepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

int64_t ModelScheduler::queued() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t ModelScheduler::executing() const {
  std::lock_guard lock(mu_);
  return executing_;
}

void ModelScheduler::Complete(std::unique_ptr<InferRequest> request,
                              Result<InferResponse> result) {
  if (request && request->done) request->done(std::move(result));
}

std::vector<std::unique_ptr<InferRequest>> ModelScheduler::TakeRequests(
    std::unique_lock<std::mutex>& lock, size_t n) {
  std::vector<std::unique_ptr<InferRequest>> batch, expired;
  const auto now = Clock::now();
  while (!queue_.empty() && batch.size() < n) {
    auto r = std::move(queue_.front());
    queue_.pop_front();
    (r->deadline <= now ? expired : batch).push_back(std::move(r));
  }
  if (!expired.empty()) {
    lock.unlock();
    for (auto& r : expired) {
      const auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - r->arrival).count();
      Complete(std::move(r), DeadlineExceeded("request to '" + options_.model +
                                              "' expired after " + std::to_string(waited) +
                                              " ms in the queue; it was not executed"));
    }
    lock.lock();
  }
  return batch;
}

void ModelScheduler::WorkerLoop(std::stop_token stop, int index) {
  Status pinned = PinCurrentThread(options_.cpu_affinity);
  if (!pinned.ok()) spdlog::warn("model {} worker {}: {}", options_.model, index, pinned.ToString());
  auto instance = session_.CreateInstance(index);
  {
    std::lock_guard lock(mu_);
    if (instance.ok()) {
      ++instances_ready_;
    } else if (instance_error_.ok()) {
      instance_error_ = instance.status().WithContext("creating instance " + std::to_string(index));
    }
  }
  cv_.notify_all();
  if (!instance.ok()) return;
  if (session_.style() == ExecutionStyle::kContinuous) {
    return ContinuousLoop(stop, static_cast<ContinuousInstance&>(**instance));
  }

  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, stop, [&] { return !queue_.empty(); });
    if (stop.stop_requested()) return;
    const size_t max_batch = static_cast<size_t>(options_.max_batch);
    if (options_.max_queue_delay.count() > 0 && queue_.size() < max_batch) {
      const auto flush_at = queue_.front()->arrival + options_.max_queue_delay;
      cv_.wait_until(lock, stop, flush_at, [&] { return queue_.size() >= max_batch; });
      if (stop.stop_requested()) return;
      if (queue_.empty()) continue;  // another worker took them
    }
    auto requests = TakeRequests(lock, max_batch);
    if (requests.empty()) continue;
    executing_ += static_cast<int64_t>(requests.size());
    lock.unlock();

    std::vector<BatchItem> items;
    items.reserve(requests.size());
    for (const auto& r : requests) items.push_back({r.get()});
    Status status = (*instance)->Execute(BatchView(items));
    for (size_t i = 0; i < requests.size(); ++i) {
      Complete(std::move(requests[i]),
               status.ok() ? std::move(items[i].result) : Result<InferResponse>(status));
    }

    lock.lock();
    executing_ -= static_cast<int64_t>(items.size());
  }
}

void ModelScheduler::ContinuousLoop(std::stop_token stop, ContinuousInstance& instance) {
  while (true) {
    std::vector<std::unique_ptr<InferRequest>> admitted;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [&] {
        return !instance.idle() || (!queue_.empty() && instance.free_slots() > 0);
      });
      if (stop.stop_requested()) break;
      admitted = TakeRequests(lock, static_cast<size_t>(std::max(0, instance.free_slots())));
      executing_ += static_cast<int64_t>(admitted.size());
    }
    for (auto& r : admitted) {
      // Count the request as executing until the instance completes it.
      r->done = [this, done = std::move(r->done)](Result<InferResponse> result) {
        done(std::move(result));
        std::lock_guard lock(mu_);
        --executing_;
      };
      instance.Admit(std::move(r));
    }
    if (!instance.idle()) instance.Step();
  }
  instance.CancelAll(Unavailable("model '" + options_.model + "' was unloaded"));
}

}  // namespace mmserve
