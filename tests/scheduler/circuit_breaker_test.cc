#include "scheduler/circuit_breaker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Outcome = CircuitBreaker::Outcome;
using State = CircuitBreaker::State;

class CircuitBreakerTest : public ::testing::Test {
 protected:
  // Admits one request at `now_` and records `outcome` for it.
  Status Call(Outcome outcome) {
    CircuitBreaker::Ticket ticket;
    Status s = breaker_.Admit(now_, ticket);
    if (s.ok()) breaker_.Record(ticket, outcome, "Internal: boom", now_);
    return s;
  }

  CircuitBreaker breaker_{"m", {.failures = 3, .timeouts = 2, .cooldown = 1000ms}};
  CircuitBreaker::Clock::time_point now_ = CircuitBreaker::Clock::now();
};

TEST_F(CircuitBreakerTest, OpensOnlyAfterConsecutiveFailures) {
  EXPECT_TRUE(Call(Outcome::kFailure).ok());
  EXPECT_TRUE(Call(Outcome::kFailure).ok());
  EXPECT_TRUE(Call(Outcome::kSuccess).ok());
  EXPECT_TRUE(Call(Outcome::kFailure).ok());
  EXPECT_TRUE(Call(Outcome::kNeutral).ok()) << "a cancellation neither counts nor resets";
  EXPECT_TRUE(Call(Outcome::kFailure).ok());
  EXPECT_EQ(breaker_.state(), State::kClosed);
  EXPECT_TRUE(Call(Outcome::kFailure).ok());
  EXPECT_EQ(breaker_.state(), State::kOpen);
  EXPECT_THAT(breaker_.reason(), HasSubstr("3 consecutive failures, the last: Internal: boom"));
}

TEST_F(CircuitBreakerTest, ConsecutiveTimeoutsOpenItOnTheirOwnCount) {
  EXPECT_TRUE(Call(Outcome::kTimeout).ok());
  EXPECT_TRUE(Call(Outcome::kSuccess).ok()) << "a success resets the count";
  EXPECT_TRUE(Call(Outcome::kTimeout).ok());
  EXPECT_TRUE(Call(Outcome::kFailure).ok()) << "a failure is counted apart";
  EXPECT_EQ(breaker_.state(), State::kClosed);
  EXPECT_TRUE(Call(Outcome::kTimeout).ok());
  EXPECT_EQ(breaker_.state(), State::kOpen);
  EXPECT_THAT(breaker_.reason(), HasSubstr("2 consecutive timeouts, the last: Internal: boom"));
}

TEST_F(CircuitBreakerTest, RetryAfterIsTheCoolDownLeftRoundedUp) {
  for (int i = 0; i < 3; ++i) (void)Call(Outcome::kFailure);
  EXPECT_EQ(Call(Outcome::kSuccess).retry_after_s(), 1);
  CircuitBreaker minute("m", {.failures = 1, .cooldown = 60'000ms});
  CircuitBreaker::Ticket ticket;
  ASSERT_TRUE(minute.Admit(now_, ticket).ok());
  minute.Record(ticket, Outcome::kFailure, "boom", now_);
  EXPECT_EQ(minute.Admit(now_ + 1500ms, ticket).retry_after_s(), 59) << "58.5 s left";
}

TEST_F(CircuitBreakerTest, ClosedOpenHalfOpenClosed) {
  for (int i = 0; i < 3; ++i) (void)Call(Outcome::kFailure);
  now_ += 400ms;
  Status refused = Call(Outcome::kSuccess);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("in 600 ms"));

  now_ += 600ms;  // cool-down over: one probe goes through, the next waits for its outcome
  CircuitBreaker::Ticket probe, other;
  ASSERT_TRUE(breaker_.Admit(now_, probe).ok());
  EXPECT_TRUE(probe.probe);
  EXPECT_EQ(breaker_.state(), State::kHalfOpen);
  EXPECT_EQ(breaker_.Admit(now_, other).code(), StatusCode::kUnavailable);
  breaker_.Record(probe, Outcome::kSuccess, "", now_);
  EXPECT_EQ(breaker_.state(), State::kClosed);
  EXPECT_TRUE(breaker_.reason().empty());
  EXPECT_EQ(breaker_.times_opened(), 1);
}

TEST_F(CircuitBreakerTest, AFailedProbeReopensAndANeutralOneLetsTheNextTry) {
  for (int i = 0; i < 3; ++i) (void)Call(Outcome::kFailure);
  now_ += 1000ms;
  EXPECT_TRUE(Call(Outcome::kNeutral).ok());  // probe cancelled: still half-open
  EXPECT_EQ(breaker_.state(), State::kHalfOpen);
  EXPECT_TRUE(Call(Outcome::kFailure).ok());  // the next probe fails
  EXPECT_EQ(breaker_.state(), State::kOpen);
  EXPECT_THAT(breaker_.reason(), HasSubstr("the probe request failed"));
  EXPECT_EQ(Call(Outcome::kSuccess).code(), StatusCode::kUnavailable);
}

TEST_F(CircuitBreakerTest, LateOutcomesOfEarlierRequestsChangeNothing) {
  CircuitBreaker::Ticket early;
  ASSERT_TRUE(breaker_.Admit(now_, early).ok());
  breaker_.Trip("watchdog: hung", now_);
  breaker_.Record(early, Outcome::kSuccess, "", now_);
  EXPECT_EQ(breaker_.state(), State::kOpen);
  EXPECT_EQ(breaker_.reason(), "watchdog: hung");
}

TEST_F(CircuitBreakerTest, ZeroFailuresNeverOpensByItself) {
  CircuitBreaker never("m", {.failures = 0, .cooldown = 1000ms});
  CircuitBreaker::Ticket t;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(never.Admit(now_, t).ok());
    never.Record(t, Outcome::kFailure, "x", now_);
  }
  EXPECT_EQ(never.state(), State::kClosed);
}

}  // namespace
}  // namespace mmserve
