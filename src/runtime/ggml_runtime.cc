#include "runtime/ggml_runtime.h"

#include <ggml-backend.h>
#include <llama.h>

#include <string>

#include "common/logging.h"

namespace mmserve {
namespace {

void LogToSpdlog(ggml_log_level level, const char* text, void*) {
  std::string line(text);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  if (line.empty()) return;
  switch (level) {
    case GGML_LOG_LEVEL_ERROR: spdlog::error("llama.cpp: {}", line); break;
    case GGML_LOG_LEVEL_WARN: spdlog::warn("llama.cpp: {}", line); break;
    // Its info and debug output (every tensor of every load, the graph's sizes) would bury
    // mmserve's own debug lines: trace only.
    default: spdlog::trace("llama.cpp: {}", line); break;
  }
}

}  // namespace

int GgmlRuntime::DeviceCount() const {
  int gpus = 0;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    if (ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU) ++gpus;
  }
  return gpus > 0 ? gpus : 1;
}

Result<DeviceMemory> GgmlRuntime::Memory(int device) const {
  int gpu = 0;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    if (ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_GPU) continue;
    if (gpu++ != device) continue;
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(dev, &free, &total);
    return DeviceMemory{.domain = std::string(ggml_backend_dev_name(dev)),
                        .total = static_cast<int64_t>(total),
                        .free = static_cast<int64_t>(free)};
  }
  return HostMemory();
}

Result<Runtime::InitResult> GgmlRuntime::Initialize() {
  llama_log_set(LogToSpdlog, nullptr);
  llama_backend_init();
  return InitResult::kInitialized;
}

Status GgmlRuntime::Finalize() {
  llama_backend_free();
  return Status::Ok();
}

}  // namespace mmserve
