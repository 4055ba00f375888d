// LoadQueue: the loader thread. Loads and changes of the served set run on it one at a time, in
// the order posted; a task posted for later waits for its time while those behind it go first
// (a load that gives way to a victim's minimum residency). What is still queued when it stops
// runs then, on the stopping thread: each task answers "shutting down" itself.
//
// Thread-safety: Post/PostAt from any thread, before Start too (the tasks wait for it).
#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "common/clock.h"
#include "common/mutex.h"

namespace mmserve {

class LoadQueue {
 public:
  LoadQueue() = default;
  ~LoadQueue() { Stop(); }
  LoadQueue(const LoadQueue&) = delete;
  LoadQueue& operator=(const LoadQueue&) = delete;

  void Start();  // starts the thread
  // Runs `task` on the loader thread, after those posted before it.
  void Post(std::function<void()> task) { PostAt(Clock::now(), std::move(task)); }
  // The same, not before `when` (steady clock): tasks posted after it may run first.
  void PostAt(Clock::time_point when, std::function<void()> task);
  // Stops the thread and runs what is left; returns when that is done. Idempotent.
  void Stop();

 private:
  struct Task {
    std::function<void()> run;
    Clock::time_point not_before;
  };
  void Loop(std::stop_token stop);
  // The first task whose time has come, waiting for it (or a new one); empty once stopped.
  std::function<void()> Next(std::stop_token stop);

  Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Task> tasks_ GUARDED_BY(mu_);
  uint64_t posted_ GUARDED_BY(mu_) = 0;  // tasks ever posted: a new one wakes a timed wait
  std::jthread thread_;
};

}  // namespace mmserve
