#include "scheduler/model_scheduler.h"

#include <sched.h>

#include <future>
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using namespace std::chrono_literals;

// A session whose instances record batch sizes and block until released.
class FakeSession final : public Session {
 public:
  const ModelSignature& signature() const override { return signature_; }
  int64_t resident_bytes() const override { return 0; }
  Result<std::unique_ptr<Instance>> CreateInstance(int index) override;

  void Release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }

  std::mutex mu;
  std::condition_variable cv;
  bool released = true;
  std::vector<size_t> batch_sizes;        // guarded by mu
  std::vector<std::vector<int>> affinity;  // per instance, guarded by mu
  int executed = 0;                        // guarded by mu
  bool fail_instances = false;

 private:
  ModelSignature signature_;
};

class FakeInstance final : public Instance {
 public:
  explicit FakeInstance(FakeSession& s) : s_(s) {}
  Status Execute(BatchView batch) override {
    std::unique_lock lock(s_.mu);
    s_.cv.wait(lock, [&] { return s_.released; });
    s_.batch_sizes.push_back(batch.size());
    s_.executed += static_cast<int>(batch.size());
    for (auto& item : batch) item.result = InferResponse{};
    return Status::Ok();
  }

 private:
  FakeSession& s_;
};

Result<std::unique_ptr<Instance>> FakeSession::CreateInstance(int index) {
  if (fail_instances && index == 1) return Internal("no context");
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  std::lock_guard lock(mu);
  affinity.push_back(cores);
  return std::unique_ptr<Instance>(std::make_unique<FakeInstance>(*this));
}

struct Outcome {
  std::promise<Status> promise;
  std::future<Status> future = promise.get_future();
};

std::unique_ptr<InferRequest> Request(Outcome& outcome,
                                      Clock::time_point deadline = Clock::time_point::max()) {
  auto r = std::make_unique<InferRequest>();
  r->deadline = deadline;
  r->done = [&outcome](Result<InferResponse> result) { outcome.promise.set_value(result.status()); };
  return r;
}

TEST(ModelSchedulerTest, BatchesWhatIsQueuedUpToMaxBatch) {
  FakeSession session;
  session.released = false;
  std::vector<Outcome> outcomes(7);  // outlives the scheduler, which may still complete them
  auto scheduler = ModelScheduler::Create({.model = "m", .max_batch = 4}, session);
  ASSERT_TRUE(scheduler.ok());
  for (auto& o : outcomes) ASSERT_TRUE((*scheduler)->Enqueue(Request(o)).ok());
  // The single worker took the first request at once and is blocked on it; the other six wait.
  session.Release();
  for (auto& o : outcomes) EXPECT_TRUE(o.future.get().ok());
  std::lock_guard lock(session.mu);
  EXPECT_EQ(session.executed, 7);
  for (size_t size : session.batch_sizes) EXPECT_LE(size, 4u);
  EXPECT_GE(*std::max_element(session.batch_sizes.begin(), session.batch_sizes.end()), 2u);
}

TEST(ModelSchedulerTest, WaitsUpToMaxQueueDelayForAPartialBatchToFill) {
  FakeSession session;
  std::vector<Outcome> outcomes(3);
  auto scheduler = ModelScheduler::Create(
      {.model = "m", .max_batch = 4, .max_queue_delay = std::chrono::milliseconds(80)}, session);
  ASSERT_TRUE(scheduler.ok());
  const auto start = Clock::now();
  ASSERT_TRUE((*scheduler)->Enqueue(Request(outcomes[0])).ok());
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(outcomes[1])).ok());
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(outcomes[i].future.get().ok());
  EXPECT_GE(Clock::now() - start, 75ms) << "the partial batch waited for the delay";
  {
    std::lock_guard lock(session.mu);
    EXPECT_EQ(session.batch_sizes, std::vector<size_t>{2});
  }
  // A batch that fills up goes at once, without waiting for the delay.
  std::vector<Outcome> full(4);
  const auto again = Clock::now();
  for (auto& o : full) ASSERT_TRUE((*scheduler)->Enqueue(Request(o)).ok());
  for (auto& o : full) EXPECT_TRUE(o.future.get().ok());
  EXPECT_LT(Clock::now() - again, 70ms);
  std::lock_guard lock(session.mu);
  EXPECT_EQ(session.batch_sizes.back(), 4u);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(outcomes[2])).ok());
}

TEST(ModelSchedulerTest, RejectsWhenQueueFull) {
  FakeSession session;
  session.released = false;
  Outcome running, a, b, rejected;
  auto scheduler = ModelScheduler::Create({.model = "m", .max_queue_size = 2}, session);
  ASSERT_TRUE(scheduler.ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(running)).ok());
  while ((*scheduler)->executing() == 0) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE((*scheduler)->Enqueue(Request(a)).ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(b)).ok());
  Status s = (*scheduler)->Enqueue(Request(rejected));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(rejected.future.get().code(), StatusCode::kResourceExhausted);
  session.Release();
  EXPECT_TRUE(a.future.get().ok());
  EXPECT_TRUE(b.future.get().ok());
}

TEST(ModelSchedulerTest, ExpiredRequestsAreAnsweredWithoutExecution) {
  FakeSession session;
  session.released = false;
  Outcome running, expired;
  auto scheduler = ModelScheduler::Create({.model = "m"}, session);
  ASSERT_TRUE(scheduler.ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(running)).ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(expired, Clock::now() + 10ms)).ok());
  std::this_thread::sleep_for(30ms);
  session.Release();
  Status s = expired.future.get();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("it was not executed"));
  EXPECT_TRUE(running.future.get().ok());
  std::lock_guard lock(session.mu);
  EXPECT_EQ(session.executed, 1);
}

TEST(ModelSchedulerTest, FailsToStartWhenAnInstanceCannotBeCreated) {
  FakeSession session;
  session.fail_instances = true;
  auto scheduler = ModelScheduler::Create({.model = "m", .thread_num = 2}, session);
  ASSERT_FALSE(scheduler.ok());
  EXPECT_EQ(scheduler.status().message(), "creating instance 1: no context");
}

TEST(ModelSchedulerTest, StopAcceptingRejectsNewRequestsButFinishesQueuedOnes) {
  FakeSession session;
  session.released = false;
  Outcome queued, late;
  auto scheduler = ModelScheduler::Create({.model = "m"}, session);
  ASSERT_TRUE(scheduler.ok());
  ASSERT_TRUE((*scheduler)->Enqueue(Request(queued)).ok());
  (*scheduler)->StopAccepting();
  EXPECT_EQ((*scheduler)->Enqueue(Request(late)).code(), StatusCode::kUnavailable);
  session.Release();
  EXPECT_TRUE(queued.future.get().ok());
}

TEST(ModelSchedulerTest, PinsWorkersToTheConfiguredCores) {
  FakeSession session;
  auto scheduler =
      ModelScheduler::Create({.model = "m", .thread_num = 2, .cpu_affinity = {0}}, session);
  ASSERT_TRUE(scheduler.ok());
  std::lock_guard lock(session.mu);
  ASSERT_EQ(session.affinity.size(), 2u);
  for (const auto& cores : session.affinity) EXPECT_EQ(cores, std::vector<int>{0});
}

}  // namespace
}  // namespace mmserve
