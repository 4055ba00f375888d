// GET /v2/models[/{m}]/stats: a model version's statistics in Triton's JSON shape (so Triton's
// tools read it), with what Triton lacks under "mmserve": state, memory, engine counters,
// queues by level, breaker, workers and the latency histograms.
#pragma once

#include <nlohmann/json.hpp>

#include "service/model_version.h"

namespace mmserve {

nlohmann::json ModelStatsJson(const ModelInfo& info);
// {"seconds": the keep_alive, "expires_in_s": when the idle, loaded model unloads}; null where
// it never does (no keep_alive, or not loaded).
nlohmann::json KeepAliveJson(const ModelInfo& info);

}  // namespace mmserve
