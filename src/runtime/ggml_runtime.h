// GgmlRuntime: llama.cpp's process-wide backend state (llama_backend_init / llama_backend_free),
// driven only by RuntimeGuard like every other runtime. llama.cpp's log lines go to spdlog at
// debug level (warnings and errors at their own levels).
#pragma once

#include "runtime/runtime.h"

namespace mmserve {

class GgmlRuntime final : public Runtime {
 public:
  std::string name() const override { return "ggml"; }
  // ggml's devices other than the CPU (GPUs with a CUDA/CANN build), at least 1 (the host).
  int DeviceCount() const override;
  // GPU n's memory with a GPU build; the host's RAM on a CPU-only build.
  Result<DeviceMemory> Memory(int device) const override;
  Result<InitResult> Initialize() override;
  Status Finalize() override;
};

}  // namespace mmserve
