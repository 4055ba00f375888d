// A model version's configuration as Triton's model configuration extension spells it
// (GET /v2/models/{m}/config, gRPC ModelConfig): the JSON form of model_config.proto's
// ModelConfig, so perf_analyzer and Triton clients read it. Requests carry whole tensors (the
// server batches requests, not a tensor dimension), so max_batch_size is 0 and dims are the
// signature's shapes; the dynamic batcher's settings appear under dynamic_batching and
// mmserve's own under parameters.
#pragma once

#include <nlohmann/json.hpp>

#include "service/inference_service.h"

namespace mmserve {

nlohmann::json TritonModelConfig(const ModelInfo& info);

// The model's platform string (`<project>_<format>`): the backend's, else mmserve_<backend>.
std::string PlatformOf(const ModelInfo& info);

}  // namespace mmserve
