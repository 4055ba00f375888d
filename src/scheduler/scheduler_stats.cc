// AddCounts (model_scheduler.h): a model version's statistics summed over its loads.
#include "scheduler/model_scheduler.h"

namespace mmserve {

void AddCounts(SchedulerStats& into, const SchedulerStats& more) {
  into.success += more.success;
  into.failure += more.failure;
  into.rejected += more.rejected;
  into.expired += more.expired;
  into.cancelled += more.cancelled;
  into.inference_count += more.inference_count;
  into.execution_count += more.execution_count;
  into.success_ns += more.success_ns;
  into.fail_ns += more.fail_ns;
  for (const auto& [size, b] : more.batches) {
    into.batches[size].executions += b.executions;
    into.batches[size].compute_ns += b.compute_ns;
  }
  into.request_latency.Add(more.request_latency);
  into.queue_latency.Add(more.queue_latency);
  into.compute_latency.Add(more.compute_latency);
  into.breaker_opened += more.breaker_opened;
  into.watchdog_reports += more.watchdog_reports;
  into.yields += more.yields;
  into.yield_ns += more.yield_ns;
}

}  // namespace mmserve
