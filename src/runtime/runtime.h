// Runtime: one device runtime (AscendCL, CUDA, ggml backends, the host) as RuntimeGuard drives
// it. Implementations wrap the vendor's process-wide init/finalize and per-device open/close.
// Nothing but RuntimeGuard may call these methods: that is the whole point of the guard.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/result.h"

namespace mmserve {

// The memory models on one device draw from. Models whose devices report the same `domain`
// share one budget (the host's RAM serves every CPU backend).
struct DeviceMemory {
  std::string domain;  // "host", "cuda:0", "acl:1"
  int64_t total = 0;   // bytes
  int64_t free = 0;    // bytes, now
};

// The host's RAM: the memory of every backend that runs on the CPU. The machine's (sysinfo),
// bounded by the memory cgroup's limit when one is set, as in a container with a memory limit:
// there the limit, not the node's RAM, is what the process can use before the OOM killer.
DeviceMemory HostMemory();
// The same, from `total` and `free` bytes, the cgroup file system at `cgroup_root` (v2, or v1
// with its "memory" hierarchy) and the text of /proc/self/cgroup.
DeviceMemory HostMemoryIn(const std::filesystem::path& cgroup_root,
                          const std::string& proc_self_cgroup, int64_t total, int64_t free);

class Runtime {
 public:
  enum class InitResult {
    kInitialized,         // this call initialized the runtime: mmserve owns its finalization
    kAlreadyInitialized,  // someone else did (AscendCL 100002): mmserve must never finalize it
  };

  virtual ~Runtime() = default;

  // A stable name for logs and errors: "acl", "cuda", "ggml", "host".
  virtual std::string name() const = 0;
  // The number of devices the runtime sees, or -1 when it cannot say (its library is absent);
  // may be called before Initialize().
  virtual int DeviceCount() const = 0;

  // Process-wide init/finalize (aclInit/aclFinalize, llama_backend_init/free).
  virtual Result<InitResult> Initialize() = 0;
  virtual Status Finalize() = 0;
  // False for a runtime that cannot be initialized again in a process once finalized
  // (AscendCL: aclInit after aclFinalize fails). RuntimeGuard then keeps it initialized until
  // the guard itself goes, however often its devices' last leases come and go.
  virtual bool reinitializable() const { return true; }
  // Per-device open/close (aclrtSetDevice/aclrtResetDevice). Default: nothing to do.
  virtual Status OpenDevice(int device) { return Status::Ok(); }
  virtual Status CloseDevice(int device) { return Status::Ok(); }
  // The memory of `device`; may be called before Initialize(). Default: the host's RAM.
  virtual Result<DeviceMemory> Memory(int device) const { return HostMemory(); }
};

}  // namespace mmserve
