#include "common/event_log.h"

#include <thread>

#include <gtest/gtest.h>

namespace mmserve {
namespace {

TEST(EventLogTest, ReadersAskForWhatCameAfterTheLastTheySaw) {
  EventLog log;
  EXPECT_EQ(log.last_seq(), 0u);
  EXPECT_TRUE(log.Since(0).empty());
  log.Record("loaded", "m", 1, "loaded in 5 ms");
  log.Record("unloaded", "m", 1, "idle");
  log.Record("reloaded", "", 0, "1 added");
  auto all = log.Since(0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].seq, 1u);
  EXPECT_EQ(all[0].kind, "loaded");
  EXPECT_EQ(all[2].model, "");
  EXPECT_GT(all[0].unix_ms, 1'600'000'000'000);
  auto after = log.Since(1);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].kind, "unloaded");
  EXPECT_TRUE(log.Since(3).empty());
  EXPECT_TRUE(log.Since(1000).empty());
  EXPECT_EQ(log.Since(0, 1).size(), 1u);
}

TEST(EventLogTest, KeepsOnlyTheNewestAndCountsOn) {
  EventLog log;
  for (int i = 0; i < static_cast<int>(EventLog::kCapacity) + 10; ++i) {
    log.Record("loaded", "m" + std::to_string(i), 1, "");
  }
  auto all = log.Since(0);
  ASSERT_EQ(all.size(), EventLog::kCapacity);
  EXPECT_EQ(all.front().seq, 11u);
  EXPECT_EQ(all.front().model, "m10");
  EXPECT_EQ(log.last_seq(), EventLog::kCapacity + 10);
  // A reader that fell behind gets what is left; one in the window gets exactly the rest.
  EXPECT_EQ(log.Since(5).size(), EventLog::kCapacity);
  EXPECT_EQ(log.Since(log.last_seq() - 2).size(), 2u);
}

TEST(EventLogTest, RecordsFromManyThreads) {
  EventLog log;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&log] {
      for (int i = 0; i < 50; ++i) log.Record("breaker_open", "m", 1, "x");
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(log.last_seq(), 200u);
  auto all = log.Since(0);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i].seq, all[i - 1].seq + 1);
}

}  // namespace
}  // namespace mmserve
