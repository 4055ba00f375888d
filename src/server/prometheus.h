// The Prometheus text exposition (format 0.0.4) of every model version's statistics, for
// GET /metrics. Triton's names where Triton has the metric (labels model, version), mmserve_*
// for the rest. Every family is typed, Triton's too (as Triton types them: counters without
// the "_total" suffix, which Prometheus reads as counters all the same). A version's counters
// and histograms count from the server's start: they carry across its loads and unloads, and
// an unloaded version keeps its series.
// Triton's *_duration_us counters would fail the format's lint (abbreviated units): the same
// durations are mmserve_inference_{request,queue,compute}_duration_seconds_total.
#pragma once

#include <string>
#include <vector>

#include "service/inference_service.h"

namespace mmserve {

// Server-wide figures the frontends keep.
struct ServerMetrics {
  int64_t open_connections = 0;
  int64_t requests_in_progress = 0;
  int64_t refused_connections = 0;  // over max_connections
  int64_t refused_requests = 0;     // over max_in_flight
};

std::string PrometheusText(const std::vector<ModelInfo>& models, const ServerMetrics& server);

}  // namespace mmserve
