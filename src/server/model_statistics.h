// One model version's statistics as every frontend reports them, derived once from its
// ModelInfo: KServe/Triton's statistics (HTTP GET /v2/models/stats, gRPC ModelStatistics) and
// the Prometheus exposition render this, so the three never disagree on what "fail" or "queue"
// counts.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "service/model_version.h"

namespace mmserve {

// Triton's StatisticDuration: how many, and their cumulative time.
struct StatDuration {
  int64_t count = 0;
  int64_t ns = 0;
};

struct ModelStatistics {
  std::string name;
  std::string version;
  // What the model holds now: the backend's figure, else measured over its load.
  int64_t resident_bytes = 0;
  bool loaded = false;  // false: the rest is zero (no scheduler to ask)
  int64_t inference_count = 0;  // a batch of n counts n
  int64_t execution_count = 0;  // batch executions
  StatDuration success;         // answered by the backend without error
  StatDuration fail;            // failed by the backend, or expired in the queue
  StatDuration queue;           // of the executed requests: time queued
  StatDuration compute_infer;   // of the executed requests: time executing
  std::map<int, StatDuration> batches;  // by batch size: executions and compute time
  int64_t queued = 0;                   // waiting now, every priority level
  // Failures by Triton's reason label.
  int64_t rejected = 0, cancelled = 0, backend_failures = 0, expired = 0;
};

ModelStatistics StatisticsOf(const ModelInfo& info);

}  // namespace mmserve
