#include "scheduler/priority_gate.h"

#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "testing/fake_time.h"

namespace mmserve {
namespace {

using namespace std::chrono_literals;

TEST(PriorityGateTest, OnlyLessImportantLevelsGiveWay) {
  PriorityGate gate(0ms);
  EXPECT_FALSE(gate.MustYield(3));
  gate.Enter(2);
  EXPECT_FALSE(gate.MustYield(1));  // more important than the busy level
  EXPECT_FALSE(gate.MustYield(2));  // equal levels never wait for each other
  EXPECT_TRUE(gate.MustYield(3));
  EXPECT_TRUE(gate.MustYield(9));
  gate.Enter(2);
  gate.Leave(2);
  EXPECT_TRUE(gate.MustYield(3));  // one request still out
  gate.Leave(2);
  EXPECT_FALSE(gate.MustYield(3));
}

TEST(PriorityGateTest, OnlyAModelOfAMoreImportantLevelMakesYieldingPossible) {
  PriorityGate gate;
  gate.AddModel(2);
  gate.AddModel(3);
  EXPECT_FALSE(gate.MayYield(2));
  EXPECT_TRUE(gate.MayYield(3));
  gate.RemoveModel(2);
  EXPECT_FALSE(gate.MayYield(3));
  gate.RemoveModel(3);
}

TEST(PriorityGateTest, LingersAfterTheLastAnswer) {
  testing::FakeTime time;
  PriorityGate gate(80ms, time);
  gate.Enter(1);
  gate.Leave(1);
  EXPECT_TRUE(gate.MustYield(2));  // the client's next request is likely on its way
  time.Advance(79ms);
  EXPECT_TRUE(gate.MustYield(2));
  time.Advance(1ms);
  EXPECT_FALSE(gate.MustYield(2));
}

TEST(PriorityGateTest, WaitReturnsAtOnceWhenNothingIsMoreImportant) {
  PriorityGate gate(50ms);
  gate.Enter(3);
  // Waiting would last for ever (no bound, level 3 never leaves): returning at all is the test.
  gate.Wait(2, Clock::time_point::max(), {});
  gate.Leave(3);
}

TEST(PriorityGateTest, WaitEndsALingerAfterTheMoreImportantLevelEmpties) {
  testing::FakeTime time;
  PriorityGate gate(30ms, time);
  gate.Enter(1);
  auto ended = std::async(std::launch::async, [&] {
    const auto waited = gate.Wait(4, Clock::time_point::max(), {});
    return std::make_pair(time.Now(), waited);
  });
  time.Advance(1h);
  EXPECT_EQ(ended.wait_for(20ms), std::future_status::timeout) << "level 1 is still busy";
  const auto left = time.Now();
  gate.Leave(1);
  time.Advance(29ms);
  EXPECT_EQ(ended.wait_for(20ms), std::future_status::timeout) << "ended before the linger";
  time.Advance(1ms);
  ASSERT_EQ(ended.wait_for(60s), std::future_status::ready);
  const auto [at, waited] = ended.get();
  EXPECT_EQ(at - left, 30ms);  // the linger, counted from the last answer
  EXPECT_GE(waited, 30ms);     // (the thread may have started after the first hour passed)
}

TEST(PriorityGateTest, WaitStopsAtItsBoundAndOnStop) {
  testing::FakeTime time;
  PriorityGate gate(0ms, time);
  gate.Enter(1);
  // Level 1 never leaves: only the bound ends the wait.
  const auto bound = time.Now() + 60ms;
  auto bounded = std::async(std::launch::async, [&] {
    const auto waited = gate.Wait(2, bound, {});
    return std::make_pair(time.Now(), waited);
  });
  time.Advance(59ms);
  EXPECT_EQ(bounded.wait_for(20ms), std::future_status::timeout) << "ended before its bound";
  time.Advance(1ms);
  ASSERT_EQ(bounded.wait_for(60s), std::future_status::ready);
  const auto [at, waited] = bounded.get();
  EXPECT_EQ(at, bound);
  EXPECT_GT(waited, 0ms);
  EXPECT_LE(waited, 60ms);

  std::stop_source stop;
  auto stopped = std::async(std::launch::async, [&] {
    return gate.Wait(2, Clock::time_point::max(), stop.get_token());
  });
  EXPECT_EQ(stopped.wait_for(50ms), std::future_status::timeout);
  stop.request_stop();
  ASSERT_EQ(stopped.wait_for(2s), std::future_status::ready);
  EXPECT_TRUE(gate.MustYield(2));  // still busy: it was the stop that ended the wait
  gate.Leave(1);
}

TEST(PriorityGateTest, ManyThreadsEnterAndLeaveWhileOthersWait) {
  PriorityGate gate(1ms);
  std::vector<std::jthread> high;
  for (int t = 0; t < 4; ++t) {
    high.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        gate.Enter(1);
        gate.Leave(1);
      }
    });
  }
  std::vector<std::future<Clock::duration>> low;
  for (int t = 0; t < 2; ++t) {
    low.push_back(std::async(std::launch::async, [&] {
      Clock::duration total{};
      for (int i = 0; i < 50; ++i) total += gate.Wait(3, Clock::time_point::max(), {});
      return total;
    }));
  }
  high.clear();
  for (auto& l : low) ASSERT_EQ(l.wait_for(5s), std::future_status::ready);
  std::this_thread::sleep_for(5ms);  // past the linger of the last Leave
  EXPECT_FALSE(gate.MustYield(3));
}

}  // namespace
}  // namespace mmserve
