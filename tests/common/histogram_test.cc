#include "common/histogram.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace mmserve {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(HistogramTest, ObservationsFallInTheBucketOfTheirUpperBound) {
  Histogram h;
  h.Record(0);               // <= 0.5 ms
  h.Record(kMs / 2);         // exactly on a bound: that bucket (le is "less or equal")
  h.Record(kMs / 2 + 1);     // just above: the next
  h.Record(3 * kMs);         // (2.5, 5] ms
  h.Record(3600'000 * kMs);  // an hour: +Inf
  h.Record(-5);              // a clock step back counts as 0
  EXPECT_EQ(h.counts[0], 3);
  EXPECT_EQ(h.counts[1], 1);
  EXPECT_EQ(h.counts[3], 1);
  EXPECT_EQ(h.counts.back(), 1);
  EXPECT_EQ(h.count, 6);
  EXPECT_EQ(h.sum_ns, kMs / 2 + kMs / 2 + 1 + 3 * kMs + 3600'000 * kMs);
}

TEST(HistogramTest, QuantilesInterpolateInsideTheBucketAsPrometheusDoes) {
  Histogram h;
  EXPECT_EQ(h.Quantile(0.5), 0);  // empty
  for (int i = 0; i < 90; ++i) h.Record(7 * kMs);   // (5, 10] ms
  for (int i = 0; i < 10; ++i) h.Record(80 * kMs);  // (50, 100] ms
  // The median is the 50th of 90 in (5, 10] ms: 5 + 5 * 50/90 ms.
  EXPECT_NEAR(h.Quantile(0.5), 0.005 + 0.005 * 50.0 / 90.0, 1e-12);
  // p99 is the 9th of 10 in (50, 100] ms.
  EXPECT_NEAR(h.Quantile(0.99), 0.05 + 0.05 * 9.0 / 10.0, 1e-12);
  EXPECT_NEAR(h.Quantile(1.0), 0.1, 1e-12);
  Histogram slow;
  slow.Record(3600'000 * kMs);
  EXPECT_EQ(slow.Quantile(0.5), kLatencyBuckets.back());  // +Inf reads as the last bound
}

TEST(HistogramTest, SinceIsWhatWasRecordedInBetween) {
  Histogram h;
  h.Record(1 * kMs);
  const Histogram before = h;
  h.Record(20 * kMs);
  h.Record(20 * kMs);
  const Histogram d = h.Since(before);
  EXPECT_EQ(d.count, 2);
  EXPECT_EQ(d.sum_ns, 40 * kMs);
  EXPECT_EQ(d.counts[1], 0);
  EXPECT_EQ(d.counts[5], 2);  // (10, 25] ms
  // A histogram that restarted (the model reloaded) never gives negative counts.
  EXPECT_EQ(Histogram().Since(h).count, 0);
}

TEST(HistogramTest, AtomicHistogramCountsEveryRecordFromManyThreads) {
  AtomicHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 1000; ++i) h.Record((t + 1) * kMs);
    });
  }
  for (auto& t : threads) t.join();
  const Histogram s = h.Snapshot();
  EXPECT_EQ(s.count, 4000);
  EXPECT_EQ(s.sum_ns, 1000 * (1 + 2 + 3 + 4) * kMs);
  int64_t in_buckets = 0;
  for (int64_t c : s.counts) in_buckets += c;
  EXPECT_EQ(in_buckets, 4000);
}

}  // namespace
}  // namespace mmserve
