#include "service/load_queue.h"

#include <future>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;

// What the tasks did, in order; only the loader thread (or Stop's) writes it.
struct Trail {
  Mutex mu;
  std::vector<std::string> done GUARDED_BY(mu);
  std::function<void()> Add(std::string what) {
    return [this, what] {
      MutexLock lock(mu);
      done.push_back(what);
    };
  }
  std::vector<std::string> Get() {
    MutexLock lock(mu);
    return done;
  }
};

TEST(LoadQueueTest, RunsTasksOneAtATimeInTheOrderPosted) {
  Trail trail;
  LoadQueue queue;
  // Posted before the thread starts: they wait for it.
  queue.Post(trail.Add("a"));
  queue.Post(trail.Add("b"));
  queue.Start();
  std::promise<void> last;
  queue.Post(trail.Add("c"));
  queue.Post([&] { last.set_value(); });
  last.get_future().wait();
  EXPECT_THAT(trail.Get(), ElementsAre("a", "b", "c"));
}

// A task posted for later does not hold up those behind it (a load that gives way).
TEST(LoadQueueTest, ATaskForLaterLetsThoseBehindItGoFirst) {
  Trail trail;
  LoadQueue queue;
  queue.Start();
  std::promise<void> later_ran;
  queue.PostAt(Clock::now() + 50ms, [&] {
    trail.Add("later")();
    later_ran.set_value();
  });
  std::promise<void> now_ran;
  queue.Post(trail.Add("now"));
  queue.Post([&] { now_ran.set_value(); });
  now_ran.get_future().wait();
  later_ran.get_future().wait();
  EXPECT_THAT(trail.Get(), ElementsAre("now", "later"));
}

// What is queued when it stops (for later too) still runs, so that each task can answer
// "shutting down"; none is dropped. Stop is idempotent.
TEST(LoadQueueTest, StopRunsWhatIsLeftAndAnExceptionStopsNothing) {
  Trail trail;
  LoadQueue queue;
  queue.Post([] { throw std::runtime_error("a bug in a task"); });
  queue.PostAt(Clock::now() + 1h, trail.Add("an hour away"));
  queue.Start();
  std::promise<void> first;
  queue.Post([&] { first.set_value(); });
  first.get_future().wait();  // the throwing task ran before it and did not stop the thread
  queue.Stop();
  EXPECT_THAT(trail.Get(), ElementsAre("an hour away"));
  queue.Stop();
}

}  // namespace
}  // namespace mmserve
