#include "service/job_store.h"

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/fake_time.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;

InferRequest NewRequest() {
  InferRequest r;
  r.model_name = "m";
  r.id = "req-1";
  return r;
}

TEST(JobStoreTest, PendingThenSucceededWithTheResult) {
  JobStore store({.max = 10, .ttl = 60s});
  InferRequest r = NewRequest();
  auto id = store.Start(r, 3);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->size(), 32u);
  auto job = store.Get(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kPending);
  EXPECT_EQ(job->model_version, 3);
  InferResponse response;
  response.outputs.emplace_back("OUT", DataType::kInt32, Shape{1}, std::string(4, '\0'));
  r.done(response);
  job = store.Get(*id);
  EXPECT_EQ(job->state, JobState::kSucceeded);
  ASSERT_TRUE(job->result.has_value() && job->result->ok());
  EXPECT_EQ((**job->result).outputs[0].name(), "OUT");
  EXPECT_EQ(store.Get("feedbeef").status().code(), StatusCode::kNotFound);
}

TEST(JobStoreTest, FinishedJobsExpireAndTheCountIsBounded) {
  testing::FakeTime time;
  JobStore store({.max = 2, .ttl = 50ms}, time);
  InferRequest a = NewRequest(), b = NewRequest(), c = NewRequest();
  auto first = store.Start(a, 1);
  ASSERT_TRUE(store.Start(b, 1).ok());
  auto full = store.Start(c, 1);
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  a.done(Internal("engine fault"));
  EXPECT_EQ(store.Get(*first)->state, JobState::kFailed);
  time.Advance(49ms);
  EXPECT_TRUE(store.Get(*first).ok()) << "not yet past its ttl";
  time.Advance(1ms);
  EXPECT_EQ(store.Get(*first).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store.Start(c, 1).ok()) << "the expired job made room; the pending one stays";
  EXPECT_EQ(store.size(), 2u);
}

TEST(JobStoreTest, CancellingAPendingJobCancelsItsRequest) {
  JobStore store({.max = 10, .ttl = 60s});
  InferRequest r = NewRequest();
  auto id = store.Start(r, 1);
  EXPECT_FALSE(r.cancelled());
  EXPECT_EQ(*store.Cancel(*id), JobState::kCancelled);
  EXPECT_TRUE(r.cancelled());
  r.done(InferResponse{});  // a late outcome does not resurrect it
  EXPECT_EQ(store.Get(*id)->state, JobState::kCancelled);
  EXPECT_EQ(*store.Cancel(*id), JobState::kCancelled);  // finished now: forgotten
  EXPECT_EQ(store.Get(*id).status().code(), StatusCode::kNotFound);
}

TEST(JobStoreTest, OutcomesFromManyThreads) {
  JobStore store({.max = 1000, .ttl = 60s});
  std::vector<InferRequest> requests(64);
  std::vector<std::string> ids;
  for (auto& r : requests) ids.push_back(*store.Start(r, 1));
  std::vector<std::jthread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < requests.size(); i += 4) {
        requests[i].done(InferResponse{});
        (void)store.Get(ids[i]);
      }
    });
  }
  threads.clear();
  for (const auto& id : ids) EXPECT_EQ(store.Get(id)->state, JobState::kSucceeded);
}

}  // namespace
}  // namespace mmserve
