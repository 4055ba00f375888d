#include "runtime/acl_runtime.h"

#include <cstdlib>

#include "common/logging.h"

namespace mmserve {

AclRuntime::AclRuntime(std::vector<std::string> candidates) : candidates_(std::move(candidates)) {}

Result<std::shared_ptr<const acl::AclApi>> AclRuntime::Api() const {
  std::call_once(open_once_, [this] {
    auto api = acl::AclApi::Open(candidates_);
    if (api.ok()) {
      api_ = *api;
      spdlog::debug("acl: using {}", api_->library);
    } else {
      open_error_ = api.status();
    }
  });
  if (!api_) return open_error_;
  return api_;
}

int AclRuntime::DeviceCount() const {
  auto api = Api();
  if (!api.ok()) return -1;
  uint32_t count = 0;
  if ((*api)->aclrtGetDeviceCount(&count) != acl::kSuccess) {
    (void)(*api)->RecentError();
    return -1;
  }
  return static_cast<int>(count);
}

Result<Runtime::InitResult> AclRuntime::Initialize() {
  MMS_ASSIGN_OR_RETURN(auto api, Api());
  const char* config = std::getenv("MMSERVE_ACL_CONFIG");
  const acl::aclError rc = api->aclInit(config && *config ? config : nullptr);
  if (rc == acl::kErrorRepeatInitialize) {
    (void)api->RecentError();
    initialized_ = true;
    return InitResult::kAlreadyInitialized;
  }
  if (rc != acl::kSuccess) return api->Error("initializing AscendCL", "aclInit", rc);
  initialized_ = true;
  return InitResult::kInitialized;
}

Status AclRuntime::Finalize() {
  MMS_ASSIGN_OR_RETURN(auto api, Api());
  initialized_ = false;
  if (api->aclFinalizeReference) {
    uint64_t left = 0;
    const acl::aclError rc = api->aclFinalizeReference(&left);
    if (rc != acl::kSuccess) return api->Error("finalizing AscendCL", "aclFinalizeReference", rc);
    if (left > 0) spdlog::info("acl: {} aclInit reference(s) of others remain", left);
    return Status::Ok();
  }
  const acl::aclError rc = api->aclFinalize();
  if (rc != acl::kSuccess) return api->Error("finalizing AscendCL", "aclFinalize", rc);
  return Status::Ok();
}

Status AclRuntime::OpenDevice(int device) {
  MMS_ASSIGN_OR_RETURN(auto api, Api());
  const acl::aclError rc = api->aclrtSetDevice(device);
  if (rc != acl::kSuccess) return api->Error("opening AscendCL device", "aclrtSetDevice", rc);
  return Status::Ok();
}

Status AclRuntime::CloseDevice(int device) {
  MMS_ASSIGN_OR_RETURN(auto api, Api());
  const acl::aclError rc = api->aclrtResetDevice(device);
  if (rc != acl::kSuccess) return api->Error("closing AscendCL device", "aclrtResetDevice", rc);
  return Status::Ok();
}

Result<DeviceMemory> AclRuntime::Memory(int device) const {
  DeviceMemory memory{.domain = "acl:" + std::to_string(device)};
  auto api = Api();
  if (!api.ok() || !initialized()) return memory;
  // The query is about the calling thread's current device: bind it for the call only.
  if (acl::aclError rc = (*api)->aclrtSetDevice(device); rc != acl::kSuccess) {
    return (*api)->Error("reading AscendCL device memory", "aclrtSetDevice", rc);
  }
  size_t free = 0, total = 0;
  const acl::aclError rc = (*api)->aclrtGetMemInfo(acl::kHbmMem, &free, &total);
  Status status = rc == acl::kSuccess
                      ? Status::Ok()
                      : (*api)->Error("reading AscendCL device memory", "aclrtGetMemInfo", rc);
  (void)(*api)->aclrtResetDevice(device);
  MMS_RETURN_IF_ERROR(status);
  memory.total = static_cast<int64_t>(total);
  memory.free = static_cast<int64_t>(free);
  return memory;
}

}  // namespace mmserve
