// AclRuntime: AscendCL's process-wide state (aclInit / aclFinalize) and its devices
// (aclrtSetDevice / aclrtResetDevice), driven only by RuntimeGuard like every other runtime.
//
// libascendcl.so is opened with dlopen on first use (acl::DefaultLibraryCandidates(): the
// environment's MMSERVE_ACL_LIBRARY or ASCEND_HOME_PATH, CANN's default install, the loader's
// path); without it every call reports "AscendCL not found" and nothing else breaks.
//
//   Initialize  aclInit(MMSERVE_ACL_CONFIG or NULL); 100002 (someone in the process initialized
//               it first) → kAlreadyInitialized, so the guard never finalizes it
//   Finalize    aclFinalizeReference where the library has it (reference-counted aclInit: only
//               this process's own reference goes), else aclFinalize
//   OpenDevice  aclrtSetDevice on the calling thread (a reference on the device's default
//               context for as long as the server holds the device); CloseDevice resets it
//   Memory      aclrtGetMemInfo(HBM) with the device bound; needs the runtime initialized
//
// Thread-safe; Api() may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/acl/acl_api.h"
#include "runtime/runtime.h"

namespace mmserve {

class AclRuntime final : public Runtime {
 public:
  explicit AclRuntime(std::vector<std::string> candidates = acl::DefaultLibraryCandidates());

  std::string name() const override { return "acl"; }
  // aclrtGetDeviceCount, or -1 when AscendCL is absent or cannot say.
  int DeviceCount() const override;
  Result<InitResult> Initialize() override;
  Status Finalize() override;
  bool reinitializable() const override { return false; }
  Status OpenDevice(int device) override;
  Status CloseDevice(int device) override;
  // Free and total memory of `device` ("acl:N"). Before Initialize(), or without AscendCL, the
  // capacity is unknown: total 0 (a budget then needs global.memory_pool).
  Result<DeviceMemory> Memory(int device) const override;

  // The resolved API, or why there is none ("AscendCL not found ..."). Opened once.
  Result<std::shared_ptr<const acl::AclApi>> Api() const;
  bool initialized() const { return initialized_.load(); }

 private:
  const std::vector<std::string> candidates_;
  mutable std::once_flag open_once_;
  mutable std::shared_ptr<const acl::AclApi> api_;  // set once under open_once_
  mutable Status open_error_;                        // set once under open_once_
  std::atomic<bool> initialized_{false};
};

}  // namespace mmserve
