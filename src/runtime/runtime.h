// Runtime: one device runtime (AscendCL, CUDA, ggml backends, the host) as RuntimeGuard drives
// it. Implementations wrap the vendor's process-wide init/finalize and per-device open/close.
// Nothing but RuntimeGuard may call these methods: that is the whole point of the guard.
#pragma once

#include <string>

#include "common/result.h"

namespace mmserve {

class Runtime {
 public:
  enum class InitResult {
    kInitialized,         // this call initialized the runtime: mmserve owns its finalization
    kAlreadyInitialized,  // someone else did (AscendCL 100002): mmserve must never finalize it
  };

  virtual ~Runtime() = default;

  // A stable name for logs and errors: "acl", "cuda", "ggml", "host".
  virtual std::string name() const = 0;
  // The number of devices the runtime sees; may be called before Initialize().
  virtual int DeviceCount() const = 0;

  // Process-wide init/finalize (aclInit/aclFinalize, llama_backend_init/free).
  virtual Result<InitResult> Initialize() = 0;
  virtual Status Finalize() = 0;
  // Per-device open/close (aclrtSetDevice/aclrtResetDevice). Default: nothing to do.
  virtual Status OpenDevice(int device) { return Status::Ok(); }
  virtual Status CloseDevice(int device) { return Status::Ok(); }
};

}  // namespace mmserve
