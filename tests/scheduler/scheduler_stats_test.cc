// AddCounts: what a model version carries across its loads is every count summed, and none of
// the gauges (what is queued or executing now, the breaker's state, the workers).
#include <gtest/gtest.h>

#include "scheduler/model_scheduler.h"

namespace mmserve {
namespace {

TEST(SchedulerStatsTest, AddCountsSumsTheCountsAndKeepsTheGauges) {
  SchedulerStats total, load;
  total.executing = 3;
  total.queued[1] = 2;
  total.success = 1;
  total.request_latency.Record(1'000'000);
  load.success = 4;
  load.failure = 1;
  load.rejected = 2;
  load.expired = 3;
  load.cancelled = 5;
  load.inference_count = 9;
  load.execution_count = 6;
  load.success_ns = 100;
  load.fail_ns = 7;
  load.batches[4] = {.executions = 2, .compute_ns = 50};
  load.request_latency.Record(2'000'000);
  load.queue_latency.Record(1);
  load.compute_latency.Record(1);
  load.breaker_opened = 1;
  load.watchdog_reports = 2;
  load.yields = 3;
  load.yield_ns = 4;
  load.executing = 8;
  load.breaker = CircuitBreaker::State::kOpen;
  AddCounts(total, load);
  EXPECT_EQ(total.success, 5);
  EXPECT_EQ(total.failure, 1);
  EXPECT_EQ(total.rejected, 2);
  EXPECT_EQ(total.expired, 3);
  EXPECT_EQ(total.cancelled, 5);
  EXPECT_EQ(total.inference_count, 9);
  EXPECT_EQ(total.execution_count, 6);
  EXPECT_EQ(total.success_ns, 100);
  EXPECT_EQ(total.fail_ns, 7);
  EXPECT_EQ(total.batches[4].executions, 2);
  EXPECT_EQ(total.batches[4].compute_ns, 50);
  EXPECT_EQ(total.request_latency.count, 2);
  EXPECT_EQ(total.request_latency.sum_ns, 3'000'000);
  EXPECT_EQ(total.queue_latency.count, 1);
  EXPECT_EQ(total.compute_latency.count, 1);
  EXPECT_EQ(total.breaker_opened, 1);
  EXPECT_EQ(total.watchdog_reports, 2);
  EXPECT_EQ(total.yields, 3);
  EXPECT_EQ(total.yield_ns, 4);
  // Gauges stay the receiver's.
  EXPECT_EQ(total.executing, 3);
  EXPECT_EQ(total.queued[1], 2);
  EXPECT_EQ(total.breaker, CircuitBreaker::State::kClosed);
}

}  // namespace
}  // namespace mmserve
