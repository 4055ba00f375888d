#include "scheduler/finisher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/fake_time.h"

namespace mmserve {
namespace {

using ::testing::ElementsAre;

class FinisherTest : public ::testing::Test {
 protected:
  FinisherTest() {
    options_.model = "m";
    options_.thread_num = 2;
    options_.time = &time_;
  }
  CircuitBreaker::Options BreakOnFirst() { return {.failures = 1, .timeouts = 1}; }

  Ledger Executed(uint64_t seq) {
    return {.seq = seq, .enqueued = time_.Now(), .started = time_.Now()};
  }
  InferCallback Into(std::vector<std::string>& got, std::string name) {
    return [&got, name](Result<InferResponse> r) {
      got.push_back(name + (r.ok() ? ":ok" : ":" + std::string(StatusCodeName(r.status().code()))));
    };
  }

  testing::FakeTime time_;
  ModelScheduler::Options options_;
};

TEST_F(FinisherTest, PreserveOrderingHoldsAnAnswerUntilEveryEarlierOneHasGone) {
  options_.preserve_ordering = true;
  CircuitBreaker breaker("m", {});
  Finisher finisher(options_, breaker);
  std::vector<std::string> got;
  finisher.Finish(Executed(2), Into(got, "c"), InferResponse{});
  finisher.Finish(Executed(1), Into(got, "b"), InferResponse{});
  EXPECT_TRUE(got.empty());
  finisher.Finish(Executed(0), Into(got, "a"), Internal("boom"));
  EXPECT_THAT(got, ElementsAre("a:Internal", "b:ok", "c:ok"));
}

TEST_F(FinisherTest, ARequestThatNeverRanSaysNothingToTheBreaker) {
  CircuitBreaker breaker("m", BreakOnFirst());
  Finisher finisher(options_, breaker);
  std::vector<std::string> got;
  Ledger queued{.seq = 0, .enqueued = time_.Now()};  // never started
  finisher.Finish(queued, Into(got, "a"), DeadlineExceeded("expired in the queue"));
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kClosed);
  const SchedulerStats stats = finisher.stats();
  EXPECT_EQ(stats.expired, 1);
  EXPECT_EQ(stats.failure, 0);
  finisher.Finish(Executed(1), Into(got, "b"), DeadlineExceeded("ran past its deadline"));
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kOpen);
  EXPECT_EQ(finisher.stats().failure, 1);
}

TEST_F(FinisherTest, AFailureNotToldToTheBreakerCountsButDoesNotOpenIt) {
  CircuitBreaker breaker("m", BreakOnFirst());
  Finisher finisher(options_, breaker);
  std::vector<std::string> got;
  finisher.Finish(Executed(0), Into(got, "a"), Internal("boom"), /*tell_breaker=*/false);
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kClosed);
  EXPECT_EQ(finisher.stats().failure, 1);
  finisher.Finish(Executed(1), Into(got, "b"), Internal("boom"));
  EXPECT_EQ(breaker.state(), CircuitBreaker::State::kOpen);
}

TEST_F(FinisherTest, CountsEachWayARequestLeaves) {
  CircuitBreaker breaker("m", {});
  Finisher finisher(options_, breaker);
  std::vector<std::string> got;
  finisher.Finish(Executed(0), Into(got, "ok"), InferResponse{});
  finisher.Finish(Executed(1), Into(got, "bad-input"), InvalidArgument("the request's fault"));
  finisher.Finish({.seq = 2, .enqueued = time_.Now()}, Into(got, "gone"), Cancelled("left"));
  finisher.Reject({}, Into(got, "full"), ResourceExhausted("queue full"));
  const SchedulerStats stats = finisher.stats();
  EXPECT_EQ(stats.success, 2);  // the model answered both; one with the request's own error
  EXPECT_EQ(stats.cancelled, 1);
  EXPECT_EQ(stats.rejected, 1);
  EXPECT_EQ(stats.request_latency.count, 2);  // a cancelled request has no latency
  EXPECT_EQ(stats.compute_latency.count, 2);
  EXPECT_THAT(got, ElementsAre("ok:ok", "bad-input:InvalidArgument", "gone:Cancelled",
                               "full:ResourceExhausted"));
}

}  // namespace
}  // namespace mmserve
