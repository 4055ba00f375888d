#include "service/load_queue.h"

#include <exception>

#include "common/logging.h"

namespace mmserve {
namespace {

void Run(const std::function<void()>& task) {
  try {
    task();
  } catch (const std::exception& e) {
    spdlog::error("loader thread: unexpected exception: {}", e.what());
  }
}

}  // namespace

void LoadQueue::Start() {
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

void LoadQueue::PostAt(Clock::time_point when, std::function<void()> task) {
  MutexLock lock(mu_);
  tasks_.push_back({.run = std::move(task), .not_before = when});
  ++posted_;
  cv_.notify_all();
}

void LoadQueue::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

std::function<void()> LoadQueue::Next(std::stop_token stop) {
  MutexLock lock(mu_);
  while (!stop.stop_requested()) {
    const auto now = Clock::now();
    Clock::time_point earliest = Clock::time_point::max();
    for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
      if (it->not_before <= now) {
        std::function<void()> task = std::move(it->run);
        tasks_.erase(it);
        return task;
      }
      earliest = std::min(earliest, it->not_before);
    }
    const uint64_t seen = posted_;
    const auto posted = [&]() REQUIRES(mu_) { return posted_ != seen; };
    if (tasks_.empty()) {
      cv_.wait(lock, stop, posted);
    } else {
      cv_.wait_until(lock, stop, earliest, posted);
    }
  }
  return {};
}

void LoadQueue::Loop(std::stop_token stop) {
  while (std::function<void()> task = Next(stop)) Run(task);
  // What is still queued (for later too) runs now that the service stopped accepting.
  std::deque<Task> left;
  {
    MutexLock lock(mu_);
    left.swap(tasks_);
  }
  for (auto& task : left) Run(task.run);
}

}  // namespace mmserve
