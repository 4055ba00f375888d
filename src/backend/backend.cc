#include "backend/backend.h"

namespace mmserve {

std::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kQueued: return "queued";
    case Stage::kPreprocess: return "preprocess";
    case Stage::kExecute: return "execute";
    case Stage::kPostprocess: return "postprocess";
  }
  return "unknown";
}

bool IsGaugeCounter(std::string_view key) {
  return key == "worker_pid" || key == "worker_last_exit_unix_ms" || key == "device_bytes" ||
         key == "prompt_cache_entries" || key == "prompt_cache_bytes" ||
         key == "prompt_cache_limit_bytes";
}

void AddSessionCounts(std::map<std::string, int64_t>& into_counters,
                      std::map<std::string, Histogram>& into_histograms,
                      const std::map<std::string, int64_t>& counters,
                      const std::map<std::string, Histogram>& histograms) {
  for (const auto& [key, value] : counters) {
    if (!IsGaugeCounter(key)) into_counters[key] += value;
  }
  for (const auto& [key, h] : histograms) into_histograms[key].Add(h);
}

std::unique_ptr<InferRequest> Session::WarmupRequest(int rows) const {
  auto request = std::make_unique<InferRequest>();
  for (const TensorSpec& spec : signature().inputs) {
    if (spec.optional) continue;
    Shape shape = spec.shape.empty() ? Shape{rows} : spec.shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] < 0) shape[d] = d == 0 ? rows : 1;
    }
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    std::string data;
    if (spec.type == DataType::kBytes) {
      for (int64_t e = 0; e < elements; ++e) Tensor::AppendBytesElement(data, "warmup");
    } else {
      data.assign(static_cast<size_t>(elements) * DataTypeSize(spec.type), '\0');
    }
    request->inputs.emplace_back(spec.name, spec.type, std::move(shape), std::move(data));
  }
  if (request->inputs.empty()) return nullptr;
  return request;
}

Result<std::unique_ptr<Session>> Backend::Load(const ModelConfig& model, LoadProgress* progress) {
  LoadProgress quiet(model.name, 0);  // a total of 0 is never logged
  LoadProgress& reported = progress ? *progress : quiet;
  auto session = LoadSession(model, reported);
  if (session.ok()) reported.Finish();
  return session;
}

}  // namespace mmserve
