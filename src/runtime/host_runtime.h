// HostRuntime: the "runtime" of backends that run on the host CPU (identity, llama on CPU). It
// has nothing to initialize, but going through RuntimeGuard like every other runtime keeps one
// lifecycle for all backends and lets tests see host models in the guard's stack.
#pragma once

#include "runtime/runtime.h"

namespace mmserve {

class HostRuntime final : public Runtime {
 public:
  std::string name() const override { return "host"; }
  int DeviceCount() const override { return 1; }
  Result<InitResult> Initialize() override { return InitResult::kInitialized; }
  Status Finalize() override { return Status::Ok(); }
};

}  // namespace mmserve
