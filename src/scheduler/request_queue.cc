#include "scheduler/request_queue.h"

#include <algorithm>

namespace mmserve {

Status DeadOutcome(const std::string& model, const Pending& p, Clock::time_point now) {
  if (p.deadline <= now) {
    return DeadlineExceeded("request to '" + model + "' expired after " +
                            std::to_string(Millis(now - p.request->arrival)) +
                            " ms in the queue; it was not executed");
  }
  if (p.request->cancelled && p.request->cancelled()) {
    return Cancelled("the request to '" + model +
                     "' was cancelled while queued; it was not executed");
  }
  return Status::Ok();
}

Status Overrun(const std::string& model, const Pending& p, Clock::time_point now) {
  return DeadlineExceeded(
      "request to '" + model + "' timed out: its execution ran past the request's " +
      std::to_string(Millis(p.deadline - p.arrival)) + " ms deadline (" +
      std::to_string(Millis(now - p.ledger.started)) + " ms executing); its result is discarded");
}

RequestQueue::RequestQueue(std::string model, const Levels& levels)
    : model_(std::move(model)), levels_(levels) {}

Status RequestQueue::CheckOpen() const {
  return open_ ? Status::Ok() : Unavailable("model '" + model_ + "' is shutting down");
}

Status RequestQueue::Push(std::unique_ptr<Pending>& p) {
  MMS_RETURN_IF_ERROR(CheckOpen());
  auto& queue = queues_[static_cast<size_t>(p->level)];
  const int64_t bound = levels_[static_cast<size_t>(p->level)].max_size;
  if (static_cast<int64_t>(queue.size()) >= bound) {
    return ResourceExhausted("model '" + model_ + "' queue for priority level " +
                             std::to_string(p->level) + " is full (" + std::to_string(bound) +
                             " requests)");
  }
  p->ledger.seq = NextSeq();
  queue.push_back(std::move(p));
  ++size_;
  return Status::Ok();
}

std::vector<std::unique_ptr<Pending>> RequestQueue::Take(size_t n, Clock::time_point now,
                                                         DeadRequests& dead) {
  std::vector<std::unique_ptr<Pending>> taken;
  for (size_t level = 1; level < queues_.size() && taken.size() < n; ++level) {
    auto& queue = queues_[level];
    while (!queue.empty() && taken.size() < n) {
      auto p = std::move(queue.front());
      queue.pop_front();
      --size_;
      if (Status s = DeadOutcome(model_, *p, now); !s.ok()) {
        dead.emplace_back(std::move(p), std::move(s));
      } else {
        taken.push_back(std::move(p));
      }
    }
  }
  return taken;
}

void RequestQueue::TakeDead(Clock::time_point now, DeadRequests& dead) {
  for (auto& queue : queues_) {
    // Live requests slide forward over the dead ones: linear, however many die at once.
    auto live = queue.begin();
    for (auto& p : queue) {
      if (Status s = DeadOutcome(model_, *p, now); !s.ok()) {
        dead.emplace_back(std::move(p), std::move(s));
      } else {
        if (&*live != &p) *live = std::move(p);
        ++live;
      }
    }
    size_ -= queue.end() - live;
    queue.erase(live, queue.end());
  }
}

std::vector<std::unique_ptr<Pending>> RequestQueue::TakeAll() {
  std::vector<std::unique_ptr<Pending>> all;
  for (auto& queue : queues_) {
    for (auto& p : queue) all.push_back(std::move(p));
    queue.clear();
  }
  size_ = 0;
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a->ledger.seq < b->ledger.seq; });
  return all;
}

Clock::time_point RequestQueue::OldestEnqueued() const {
  Clock::time_point oldest = Clock::time_point::max();
  for (const auto& queue : queues_) {
    if (!queue.empty()) oldest = std::min(oldest, queue.front()->ledger.enqueued);
  }
  return oldest;
}

Clock::time_point RequestQueue::EarliestDeadline() const {
  Clock::time_point earliest = Clock::time_point::max();
  for (const auto& queue : queues_) {
    for (const auto& p : queue) earliest = std::min(earliest, p->deadline);
  }
  return earliest;
}

}  // namespace mmserve
