#include "scheduler/request_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mmserve {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Clock::time_point kNow = Clock::now();

RequestQueue::Levels Bounded(int64_t max_size) {
  RequestQueue::Levels levels;
  for (auto& l : levels) l.max_size = max_size;
  return levels;
}

std::unique_ptr<Pending> Make(std::string id, int level,
                              Clock::time_point deadline = Clock::time_point::max()) {
  auto p = std::make_unique<Pending>();
  p->request = std::make_unique<InferRequest>();
  p->request->id = std::move(id);
  p->request->arrival = kNow;
  p->level = level;
  p->deadline = deadline;
  p->ledger.enqueued = kNow;
  return p;
}

void PushOk(RequestQueue& q, std::unique_ptr<Pending> p) {
  ASSERT_TRUE(q.Push(p).ok());
  EXPECT_EQ(p, nullptr);
}

std::vector<std::string> Ids(const std::vector<std::unique_ptr<Pending>>& ps) {
  std::vector<std::string> ids;
  for (const auto& p : ps) ids.push_back(p->request->id);
  return ids;
}

std::vector<std::string> Ids(const DeadRequests& dead) {
  std::vector<std::string> ids;
  for (const auto& [p, status] : dead) ids.push_back(p->request->id);
  return ids;
}

TEST(RequestQueueTest, TakesTheHighestLevelFirstAndArrivalOrderWithinALevel) {
  RequestQueue q("m", Bounded(10));
  PushOk(q, Make("low-1", 7));
  PushOk(q, Make("high-1", 2));
  PushOk(q, Make("low-2", 7));
  PushOk(q, Make("high-2", 2));
  EXPECT_EQ(q.size(), 4);
  EXPECT_EQ(q.size(2), 2);
  DeadRequests dead;
  EXPECT_THAT(Ids(q.Take(3, kNow, dead)), ElementsAre("high-1", "high-2", "low-1"));
  EXPECT_THAT(Ids(q.Take(3, kNow, dead)), ElementsAre("low-2"));
  EXPECT_TRUE(dead.empty());
  EXPECT_EQ(q.size(), 0);
}

TEST(RequestQueueTest, AFullLevelRefusesAndLeavesTheRequestWithTheCaller) {
  RequestQueue q("m", Bounded(1));
  PushOk(q, Make("a", 5));
  auto b = Make("b", 5);
  Status s = q.Push(b);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("priority level 5 is full (1 requests)"));
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->request->id, "b");
  PushOk(q, Make("c", 4));  // another level has room of its own
  EXPECT_EQ(q.size(), 2);
}

TEST(RequestQueueTest, AClosedQueueRefusesButKeepsWhatIsQueued) {
  RequestQueue q("m", Bounded(10));
  PushOk(q, Make("a", 5));
  q.Close();
  auto b = Make("b", 5);
  EXPECT_EQ(q.Push(b).code(), StatusCode::kUnavailable);
  EXPECT_EQ(q.CheckOpen().code(), StatusCode::kUnavailable);
  EXPECT_EQ(q.size(), 1);
}

TEST(RequestQueueTest, TakeSetsAsideExpiredAndCancelledRequestsWithTheirAnswer) {
  RequestQueue q("m", Bounded(10));
  PushOk(q, Make("expired", 5, kNow - 1ms));
  auto cancelled = Make("cancelled", 5);
  cancelled->request->cancelled = [] { return true; };
  PushOk(q, std::move(cancelled));
  PushOk(q, Make("live", 5));
  DeadRequests dead;
  EXPECT_THAT(Ids(q.Take(1, kNow, dead)), ElementsAre("live"));
  ASSERT_THAT(Ids(dead), ElementsAre("expired", "cancelled"));
  EXPECT_EQ(dead[0].second.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(dead[1].second.code(), StatusCode::kCancelled);
}

TEST(RequestQueueTest, TakeDeadRemovesTheDeadWhereverTheyWaitAndKeepsTheRestInOrder) {
  RequestQueue q("m", Bounded(1000));
  std::vector<std::string> live;
  for (int i = 0; i < 300; ++i) {
    const bool dies = i % 3 != 0;
    const std::string id = std::to_string(i);
    PushOk(q, Make(id, 1 + i % 2, dies ? kNow + 1ms : kNow + 1h));
    if (!dies) live.push_back(id);
  }
  DeadRequests dead;
  q.TakeDead(kNow + 2ms, dead);
  EXPECT_EQ(dead.size(), 200u);
  EXPECT_EQ(q.size(), 100);
  // Level 1 had the even numbers, level 2 the odd ones; each keeps its arrival order.
  std::vector<std::string> expected;
  for (int level = 1; level <= 2; ++level) {
    for (const auto& id : live) {
      if (1 + std::stoi(id) % 2 == level) expected.push_back(id);
    }
  }
  DeadRequests none;
  EXPECT_EQ(Ids(q.Take(1000, kNow + 2ms, none)), expected);
  EXPECT_TRUE(none.empty());
}

TEST(RequestQueueTest, TakeAllReturnsEverythingInArrivalOrderAcrossLevels) {
  RequestQueue q("m", Bounded(10));
  PushOk(q, Make("first", 9));
  PushOk(q, Make("second", 1));
  PushOk(q, Make("third", 5));
  EXPECT_THAT(Ids(q.TakeAll()), ElementsAre("first", "second", "third"));
  EXPECT_EQ(q.size(), 0);
}

TEST(RequestQueueTest, ReportsTheOldestArrivalAndTheEarliestDeadline) {
  RequestQueue q("m", Bounded(10));
  EXPECT_EQ(q.OldestEnqueued(), Clock::time_point::max());
  EXPECT_EQ(q.EarliestDeadline(), Clock::time_point::max());
  auto a = Make("a", 5, kNow + 3s);
  a->ledger.enqueued = kNow + 1ms;
  PushOk(q, std::move(a));
  auto b = Make("b", 6, kNow + 2s);
  b->ledger.enqueued = kNow;
  PushOk(q, std::move(b));
  PushOk(q, Make("c", 5, kNow + 5s));
  EXPECT_EQ(q.OldestEnqueued(), kNow);
  EXPECT_EQ(q.EarliestDeadline(), kNow + 2s);
}

}  // namespace
}  // namespace mmserve
