#include "server/model_statistics.h"

namespace mmserve {

ModelStatistics StatisticsOf(const ModelInfo& info) {
  ModelStatistics out{.name = info.config.name,
                      .version = std::to_string(info.config.version),
                      .resident_bytes = info.resident_bytes > 0 ? info.resident_bytes
                                        : info.state == ModelState::kReady ? info.measured_bytes
                                                                           : 0};
  if (!info.stats) return out;
  const SchedulerStats& st = *info.stats;
  const int64_t executed = st.success + st.failure;
  out.loaded = true;
  out.inference_count = st.inference_count;
  out.execution_count = st.execution_count;
  out.success = {st.success, st.success_ns};
  out.fail = {st.failure + st.expired, st.fail_ns};
  out.queue = {executed, st.queue_latency.sum_ns};
  out.compute_infer = {executed, st.compute_latency.sum_ns};
  for (const auto& [size, b] : st.batches) out.batches[size] = {b.executions, b.compute_ns};
  for (int64_t q : st.queued) out.queued += q;
  out.rejected = st.rejected;
  out.cancelled = st.cancelled;
  out.backend_failures = st.failure;
  out.expired = st.expired;
  return out;
}

}  // namespace mmserve
