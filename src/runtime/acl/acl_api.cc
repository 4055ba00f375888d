#include "runtime/acl/acl_api.h"

#include <dlfcn.h>

#include <cstdlib>

namespace mmserve::acl {
namespace {

struct ErrorInfo {
  aclError code;
  std::string_view name;
  std::string_view meaning;
};

// The documented aclError values (shared/reference/ascendcl.md §3), in the project's words.
constexpr ErrorInfo kErrors[] = {
    {0, "ACL_SUCCESS", "success"},
    {100000, "ACL_ERROR_INVALID_PARAM", "a parameter failed its check"},
    {100001, "ACL_ERROR_UNINITIALIZE", "aclInit has not been called"},
    {100002, "ACL_ERROR_REPEAT_INITIALIZE", "initialized (or loaded) again"},
    {100003, "ACL_ERROR_INVALID_FILE", "the file is missing or cannot be accessed"},
    {100004, "ACL_ERROR_WRITE_FILE", "writing the file failed"},
    {100005, "ACL_ERROR_INVALID_FILE_SIZE", "the file has an invalid size"},
    {100006, "ACL_ERROR_PARSE_FILE", "the file cannot be parsed"},
    {100007, "ACL_ERROR_FILE_MISSING_ATTR", "the file lacks attributes"},
    {100008, "ACL_ERROR_FILE_ATTR_INVALID", "the file has invalid attributes"},
    {100011, "ACL_ERROR_INVALID_MODEL_ID", "the model id is wrong or not loaded"},
    {100012, "ACL_ERROR_DESERIALIZE_MODEL",
     "the OM file does not match this CANN version (convert it again with ATC)"},
    {100013, "ACL_ERROR_PARSE_MODEL", "the OM file cannot be parsed (version mismatch)"},
    {100014, "ACL_ERROR_READ_MODEL_FAILURE", "the model file cannot be read"},
    {100015, "ACL_ERROR_MODEL_SIZE_INVALID", "the model size is invalid"},
    {100016, "ACL_ERROR_MODEL_MISSING_ATTR", "the model lacks attributes (version mismatch)"},
    {100017, "ACL_ERROR_MODEL_INPUT_NOT_MATCH", "the input dataset does not match the model"},
    {100018, "ACL_ERROR_MODEL_OUTPUT_NOT_MATCH", "the output dataset does not match the model"},
    {100019, "ACL_ERROR_MODEL_NOT_DYNAMIC", "a dynamic-shape call on a static model"},
    {100026, "ACL_ERROR_UNSUPPORTED_DATA_TYPE", "unsupported data type"},
    {100027, "ACL_ERROR_FORMAT_NOT_MATCH", "format mismatch"},
    {100036, "ACL_ERROR_WAIT_CALLBACK_TIMEOUT", "waiting for a callback timed out"},
    {100037, "ACL_ERROR_REPEAT_FINALIZE", "aclFinalize called twice"},
    {148049, "ACL_ERROR_INVALID_OPP_PATH", "ASCEND_OPP_PATH is unset or wrong"},
    {148051, "ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED", "a dependent resource was not released"},
    {200000, "ACL_ERROR_BAD_ALLOC", "memory allocation failed"},
    {200001, "ACL_ERROR_API_NOT_SUPPORT", "the API is not supported here"},
    {200002, "ACL_ERROR_INVALID_DEVICE", "invalid device"},
    {200003, "ACL_ERROR_MEMORY_ADDRESS_UNALIGNED", "the memory address is not aligned"},
    {200004, "ACL_ERROR_RESOURCE_NOT_MATCH", "the stream or context passed does not match"},
    {200005, "ACL_ERROR_INVALID_RESOURCE_HANDLE", "invalid handle"},
    {200006, "ACL_ERROR_FEATURE_UNSUPPORTED", "feature unsupported"},
    {300000, "ACL_ERROR_STORAGE_OVER_LIMIT", "storage limit exceeded"},
    {500000, "ACL_ERROR_INTERNAL_ERROR", "internal AscendCL error"},
    {500001, "ACL_ERROR_FAILURE", "AscendCL failure"},
    {500002, "ACL_ERROR_GE_FAILURE", "graph engine failure"},
    {500003, "ACL_ERROR_RT_FAILURE", "runtime failure"},
    {500004, "ACL_ERROR_DRV_FAILURE", "driver failure"},
    {107000, "ACL_ERROR_RT_PARAM_INVALID", "a runtime parameter is invalid"},
    {107001, "ACL_ERROR_RT_INVALID_DEVICEID", "invalid device id"},
    {107002, "ACL_ERROR_RT_CONTEXT_NULL", "no current context on this thread"},
    {107003, "ACL_ERROR_RT_STREAM_CONTEXT", "the stream is not in the current context"},
    {107004, "ACL_ERROR_RT_MODEL_CONTEXT", "the model is not in the current context"},
    {107019, "ACL_ERROR_RT_WAIT_TIMEOUT", "a wait timed out"},
    {107020, "ACL_ERROR_RT_TASK_TIMEOUT", "a task timed out"},
    {207000, "ACL_ERROR_RT_FEATURE_NOT_SUPPORT", "runtime feature not supported"},
    {207001, "ACL_ERROR_RT_MEMORY_ALLOCATION", "device memory allocation failed"},
    {207004, "ACL_ERROR_RT_NO_DEVICE", "no device"},
    {207008, "ACL_ERROR_RT_NO_STREAM_RESOURCE", "no stream left"},
    {207018, "ACL_ERROR_RT_DEVICE_OOM", "device memory exhausted"},
    {507000, "ACL_ERROR_RT_INTERNAL_ERROR", "host runtime internal error"},
    {507001, "ACL_ERROR_RT_TS_ERROR", "task scheduler internal error"},
    {507008, "ACL_ERROR_RT_SOC_VERSION",
     "SoC version mismatch (the model was compiled for another SoC)"},
    {507009, "ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT", "task type not supported"},
    {507010, "ACL_ERROR_RT_LOST_HEARTBEAT", "the task scheduler lost its heartbeat"},
    {507011, "ACL_ERROR_RT_MODEL_EXECUTE", "model execution failed"},
    {507013, "ACL_ERROR_RT_SYS_DMA", "DMA hardware error"},
    {507014, "ACL_ERROR_RT_AICORE_TIMEOUT", "an AI Core kernel timed out"},
    {507015, "ACL_ERROR_RT_AICORE_EXCEPTION", "AI Core exception"},
    {507016, "ACL_ERROR_RT_AICORE_TRAP_EXCEPTION", "AI Core trap"},
    {507017, "ACL_ERROR_RT_AICPU_TIMEOUT", "AI CPU timeout"},
    {507018, "ACL_ERROR_RT_AICPU_EXCEPTION", "AI CPU exception"},
    {507033, "ACL_ERROR_RT_DEV_SETUP_ERROR", "device start-up failed"},
    {507034, "ACL_ERROR_RT_VECTOR_CORE_TIMEOUT", "vector core timeout"},
    {507035, "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", "vector core exception"},
    {507046, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", "the stream did not complete within the timeout"},
    {507047, "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT", "event synchronization timed out"},
    {507053, "ACL_ERROR_RT_DEVICE_MEM_ERROR", "device memory fault"},
    {507054, "ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR", "HBM multi-bit ECC error"},
    {507899, "ACL_ERROR_RT_DRV_INTERNAL_ERROR", "driver internal error"},
    {507900, "ACL_ERROR_RT_AICPU_INTERNAL_ERROR", "AI CPU internal error"},
    {507901, "ACL_ERROR_RT_SOCKET_CLOSE", "the host-device channel closed"},
    {145000, "ACL_ERROR_GE_PARAM_INVALID", "graph engine parameter invalid"},
    {145002, "ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID", "invalid model path"},
    {145003, "ACL_ERROR_GE_EXEC_MODEL_ID_INVALID", "invalid model id"},
    {145013, "ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID", "the batch size is not a compiled gear"},
    {245000, "ACL_ERROR_GE_MEMORY_ALLOCATION", "graph engine memory allocation failed"},
    {545001, "ACL_ERROR_GE_LOAD_MODEL", "graph engine model load failed"},
    {545601, "ACL_ERROR_GE_MODEL_EXECUTE_TIMEOUT", "model execution timed out"},
};

const ErrorInfo* FindError(aclError code) {
  for (const auto& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

}  // namespace

std::string_view ErrorName(aclError code) {
  const ErrorInfo* e = FindError(code);
  return e ? e->name : "unknown aclError";
}

std::string ErrorMeaning(aclError code) {
  if (const ErrorInfo* e = FindError(code)) return std::string(e->meaning);
  // The documented ranges: 1xxxxx caller or environment, 2xxxxx resources or an API/hardware
  // mismatch, 3xxxxx business state, 5xxxxx internal software or hardware faults.
  switch (code / 100000) {
    case 1: return "a caller or environment error";
    case 2: return "a resource shortage or an API/hardware mismatch";
    case 3: return "a business-state error";
    case 5: return "an internal software or hardware fault (collect the device logs)";
    default: return "not a documented AscendCL code";
  }
}

const ErrorClass& ClassOf(aclError code) {
  // Status codes carry the breaker effect: Unavailable and Internal count as failures,
  // DeadlineExceeded as a timeout (scheduler/model_scheduler.cc OutcomeOf).
  static const ErrorClass kDeviceMemory{
      "device memory", StatusCode::kUnavailable,
      "the device is out of memory: lower thread_num or max_batch, make other models on_demand, "
      "or lower memory_pool to leave room for what else runs on the card"};
  static const ErrorClass kTimeout{
      "device timeout", StatusCode::kDeadlineExceeded,
      "the device did not finish in time: raise timeout_ms, lower max_batch, or check the card "
      "with npu-smi info"};
  static const ErrorClass kModelMismatch{
      "model mismatch", StatusCode::kUnavailable,
      "the OM file does not fit this CANN version or SoC: convert it again with ATC "
      "(--soc_version matching npu-smi info)"};
  static const ErrorClass kDeviceFault{
      "device fault", StatusCode::kInternal,
      "a device, driver or runtime fault: collect the device logs (msnpureport) and check "
      "npu-smi info; the card may need a reset"};
  static const ErrorClass kCallRefused{
      "call refused", StatusCode::kInternal,
      "AscendCL refused a call mmserve made: a bug in mmserve, please report this message"};
  switch (code) {
    case 200000: case 207001: case 207018: case 245000: case 300000:
      return kDeviceMemory;
    case 100036: case 107019: case 107020: case 507014: case 507017: case 507034:
    case 507046: case 507047: case 545601:
      return kTimeout;
    case 100003: case 100005: case 100006: case 100007: case 100008: case 100012:
    case 100013: case 100014: case 100015: case 100016: case 148049: case 507008:
      return kModelMismatch;
    case 100000: case 100001: case 100011: case 100017: case 100018: case 100019:
    case 107000: case 107002: case 107003: case 145013: case 200004: case 200005:
      return kCallRefused;
    default:
      return kDeviceFault;
  }
}

StatusCode ErrorStatusCode(aclError code) { return ClassOf(code).status; }

std::vector<std::string> DefaultLibraryCandidates() {
  std::vector<std::string> out;
  if (const char* file = std::getenv("MMSERVE_ACL_LIBRARY"); file && *file) out.push_back(file);
  if (const char* home = std::getenv("ASCEND_HOME_PATH"); home && *home) {
    out.push_back(std::string(home) + "/lib64/libascendcl.so");
  }
  out.push_back("/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so");
  out.push_back("libascendcl.so");
  return out;
}

Result<std::shared_ptr<const AclApi>> AclApi::Open(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const auto& candidate : candidates) {
    void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      tried += std::string("\n  ") + ::dlerror();
      continue;
    }
    auto api = std::make_shared<AclApi>();
    api->library = candidate;
    std::string missing;
#define MMS_ACL_RESOLVE(required, ret, name, params)                              \
  api->name = reinterpret_cast<ret(*) params>(::dlsym(handle, #name));            \
  if (required && !api->name) missing += std::string(missing.empty() ? "" : ", ") + #name;
    MMS_ACL_FUNCTIONS(MMS_ACL_RESOLVE)
#undef MMS_ACL_RESOLVE
    if (!missing.empty()) {
      // Not AscendCL after all (or too old a CANN): say which entry points are missing.
      ::dlclose(handle);
      return FailedPrecondition("AscendCL library " + candidate +
                                " lacks required entry points: " + missing);
    }
    return std::shared_ptr<const AclApi>(std::move(api));
  }
  return Unavailable("AscendCL not found (libascendcl.so; set ASCEND_HOME_PATH, e.g. source "
                     "ascend-toolkit's set_env.sh, or MMSERVE_ACL_LIBRARY); tried:" + tried);
}

std::string AclApi::RecentError() const {
  if (!aclGetRecentErrMsg) return "";
  const char* text = aclGetRecentErrMsg();
  return text ? std::string(text) : std::string();
}

Status AclApi::Error(std::string_view what, std::string_view call, aclError code) const {
  std::string message = std::string(what) + ": " + std::string(call) + " returned " +
                        std::to_string(code) + " " + std::string(ErrorName(code)) + " (" +
                        ErrorMeaning(code) + ")";
  if (std::string recent = RecentError(); !recent.empty()) {
    message += "; AscendCL says: " + recent;
  }
  const ErrorClass& error_class = ClassOf(code);
  message += " [" + std::string(error_class.name) + ": " + std::string(error_class.hint) + "]";
  return Status(error_class.status, std::move(message));
}

}  // namespace mmserve::acl
