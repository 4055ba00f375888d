// What the server tells a model's worker process (its config: kInit) and what the worker tells
// back once its session is loaded (kReady): both JSON, read as hostile input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "common/result.h"
#include "config/model_config.h"

namespace mmserve {

// The fields of `model` that shape its load, with `isolation` none (the worker runs it in its
// own process). Paths are absolute already.
std::string EncodeWorkerSpec(const ModelConfig& model);
Result<ModelConfig> DecodeWorkerSpec(std::string_view payload);

// The facts of a loaded session that the server asks for without a round trip.
struct WorkerFacts {
  ModelSignature signature;
  int64_t resident_bytes = 0;
  std::vector<int> batch_tiers;
  int default_warmup = 0;
  int64_t context_length = 0;
  bool executions_share_device = false;
  // The model's memory is the host's RAM (CPU engines): then the worker's own private memory,
  // measured, is what it costs the budget. Otherwise (a card) the session's figure is.
  bool host_memory = false;
  bool continuous = false;  // ExecutionStyle::kContinuous (generation)
  // How long the worker took to load the model (its runtime and the backend's Load): the rest
  // of a start is the process's own (exec, linking, handshake).
  int64_t load_us = 0;
};
std::string EncodeWorkerFacts(const Session& session, bool host_memory, int64_t load_us);
Result<WorkerFacts> DecodeWorkerFacts(std::string_view payload);

}  // namespace mmserve
