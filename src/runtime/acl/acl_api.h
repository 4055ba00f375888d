// AclApi: the AscendCL C API as mmserve uses it, resolved at run time from libascendcl.so with
// dlopen/dlsym, so mmserve builds and runs without CANN. The declarations below are the
// project's own, written from the documented prototypes (shared/reference/ascendcl.md §1–§2):
// C linkage, every enum an int, opaque handles as pointers. The simulator in sim/ascendcl
// implements the same list and static_asserts each of its definitions against it.
//
// Thread-safety: an AclApi is immutable after Open() and may be shared by any threads; what the
// calls themselves allow is AscendCL's business (per-thread current context, one execution of a
// model id at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace mmserve::acl {

using aclError = int;
using aclrtContext = void*;
using aclrtStream = void*;
struct aclDataBuffer;  // opaque
struct aclmdlDesc;     // opaque
struct aclmdlDataset;  // opaque

inline constexpr aclError kSuccess = 0;
inline constexpr aclError kErrorInvalidParam = 100000;
inline constexpr aclError kErrorUninitialize = 100001;
inline constexpr aclError kErrorRepeatInitialize = 100002;
inline constexpr aclError kErrorInvalidFile = 100003;
inline constexpr aclError kErrorApiNotSupport = 200001;
inline constexpr aclError kErrorRtContextNull = 107002;
inline constexpr aclError kErrorRtStreamContext = 107003;
inline constexpr aclError kErrorRtModelContext = 107004;
inline constexpr aclError kErrorRtTaskTimeout = 107020;
inline constexpr aclError kErrorRtMemoryAllocation = 207001;
inline constexpr aclError kErrorRtSocVersion = 507008;
inline constexpr aclError kErrorRtStreamSyncTimeout = 507046;
inline constexpr aclError kErrorGeDynamicBatchSizeInvalid = 145013;

// aclrtMemMallocPolicy, aclrtMemcpyKind, aclrtMemAttr: the values mmserve passes.
inline constexpr int kMemMallocHugeFirst = 0;
inline constexpr int kMemcpyHostToDevice = 1;
inline constexpr int kMemcpyDeviceToHost = 2;
inline constexpr int kHbmMem = 1;  // answered with DDR figures on parts without HBM

// aclDataType values (-1 = undefined).
enum AclDataType : int {
  kAclFloat = 0, kAclFloat16 = 1, kAclInt8 = 2, kAclInt32 = 3, kAclUint8 = 4, kAclInt16 = 6,
  kAclUint16 = 7, kAclUint32 = 8, kAclInt64 = 9, kAclUint64 = 10, kAclDouble = 11,
  kAclBool = 12, kAclString = 13, kAclBf16 = 27,
};

inline constexpr size_t kMaxDimCount = 128;
inline constexpr size_t kMaxTensorNameLength = 128;
inline constexpr size_t kMaxBatchCount = 128;
// The extra input ATC adds to a dynamic-batch model; ACL fills it, the caller never writes it.
inline constexpr const char* kDynamicTensorName = "ascend_mbatch_shape_data";

struct aclmdlIODims {
  char name[kMaxTensorNameLength];
  size_t dimCount;
  int64_t dims[kMaxDimCount];
};
static_assert(sizeof(aclmdlIODims) == 1160, "aclmdlIODims layout (LP64)");

struct aclmdlBatch {
  size_t batchCount;
  uint64_t batch[kMaxBatchCount];
};
static_assert(sizeof(aclmdlBatch) == 1032, "aclmdlBatch layout (LP64)");

// X(required, return type, name, parameters). A required entry point missing from the library
// fails Open(); an optional one (newer or older CANN only) is left null.
#define MMS_ACL_FUNCTIONS(X)                                                                   \
  X(true, aclError, aclInit, (const char* config_path))                                       \
  X(true, aclError, aclFinalize, ())                                                          \
  X(false, aclError, aclFinalizeReference, (uint64_t * ref_count))                            \
  X(false, aclError, aclGetVersion, (int32_t * major, int32_t * minor, int32_t * patch))      \
  X(false, const char*, aclGetRecentErrMsg, ())                                               \
  X(false, const char*, aclrtGetSocName, ())                                                  \
  X(true, aclError, aclrtGetDeviceCount, (uint32_t * count))                                  \
  X(true, aclError, aclrtSetDevice, (int32_t device_id))                                      \
  X(true, aclError, aclrtResetDevice, (int32_t device_id))                                    \
  X(true, aclError, aclrtGetMemInfo, (int attr, size_t* free, size_t* total))                 \
  X(true, aclError, aclrtCreateContext, (aclrtContext * context, int32_t device_id))          \
  X(true, aclError, aclrtDestroyContext, (aclrtContext context))                              \
  X(true, aclError, aclrtSetCurrentContext, (aclrtContext context))                           \
  X(true, aclError, aclrtCreateStream, (aclrtStream * stream))                                \
  X(true, aclError, aclrtDestroyStream, (aclrtStream stream))                                 \
  X(true, aclError, aclrtSynchronizeStreamWithTimeout, (aclrtStream stream, int32_t timeout)) \
  X(true, aclError, aclrtMalloc, (void** dev_ptr, size_t size, int policy))                   \
  X(true, aclError, aclrtFree, (void* dev_ptr))                                               \
  X(true, aclError, aclrtMallocHost, (void** host_ptr, size_t size))                          \
  X(true, aclError, aclrtFreeHost, (void* host_ptr))                                          \
  X(true, aclError, aclrtMemcpy,                                                              \
    (void* dst, size_t dest_max, const void* src, size_t count, int kind))                    \
  X(true, aclError, aclmdlQuerySize,                                                          \
    (const char* file_name, size_t* work_size, size_t* weight_size))                          \
  X(true, aclError, aclmdlLoadFromFile, (const char* model_path, uint32_t* model_id))         \
  X(true, aclError, aclmdlLoadFromFileWithMem,                                                \
    (const char* model_path, uint32_t* model_id, void* work_ptr, size_t work_size,            \
     void* weight_ptr, size_t weight_size))                                                   \
  X(true, aclError, aclmdlUnload, (uint32_t model_id))                                        \
  X(true, aclmdlDesc*, aclmdlCreateDesc, ())                                                  \
  X(true, aclError, aclmdlDestroyDesc, (aclmdlDesc * desc))                                   \
  X(true, aclError, aclmdlGetDesc, (aclmdlDesc * desc, uint32_t model_id))                    \
  X(false, aclError, aclmdlGetDescFromFile, (aclmdlDesc * desc, const char* model_path))      \
  X(true, size_t, aclmdlGetNumInputs, (aclmdlDesc * desc))                                    \
  X(true, size_t, aclmdlGetNumOutputs, (aclmdlDesc * desc))                                   \
  X(true, size_t, aclmdlGetInputSizeByIndex, (aclmdlDesc * desc, size_t index))               \
  X(true, size_t, aclmdlGetOutputSizeByIndex, (aclmdlDesc * desc, size_t index))              \
  X(true, aclError, aclmdlGetInputDims,                                                       \
    (const aclmdlDesc* desc, size_t index, aclmdlIODims* dims))                               \
  X(true, aclError, aclmdlGetOutputDims,                                                      \
    (const aclmdlDesc* desc, size_t index, aclmdlIODims* dims))                               \
  X(true, int, aclmdlGetInputDataType, (const aclmdlDesc* desc, size_t index))                \
  X(true, int, aclmdlGetOutputDataType, (const aclmdlDesc* desc, size_t index))               \
  X(true, const char*, aclmdlGetInputNameByIndex, (const aclmdlDesc* desc, size_t index))     \
  X(true, const char*, aclmdlGetOutputNameByIndex, (const aclmdlDesc* desc, size_t index))    \
  X(true, aclError, aclmdlGetInputIndexByName,                                                \
    (const aclmdlDesc* desc, const char* name, size_t* index))                                \
  X(true, aclError, aclmdlGetDynamicBatch, (const aclmdlDesc* desc, aclmdlBatch* batch))      \
  X(true, aclError, aclmdlSetDynamicBatchSize,                                                \
    (uint32_t model_id, aclmdlDataset * dataset, size_t index, uint64_t batch_size))          \
  X(true, aclmdlDataset*, aclmdlCreateDataset, ())                                            \
  X(true, aclError, aclmdlDestroyDataset, (const aclmdlDataset* dataset))                     \
  X(true, aclError, aclmdlAddDatasetBuffer, (aclmdlDataset * dataset, aclDataBuffer * buffer)) \
  X(true, aclDataBuffer*, aclCreateDataBuffer, (void* data, size_t size))                     \
  X(true, aclError, aclDestroyDataBuffer, (const aclDataBuffer* buffer))                      \
  X(true, aclError, aclmdlExecuteAsync,                                                       \
    (uint32_t model_id, const aclmdlDataset* input, aclmdlDataset* output, aclrtStream stream))

// The name and meaning of an aclError value ("ACL_ERROR_RT_MEMORY_ALLOCATION", "device memory
// allocation failed"); unknown codes get the documented range's meaning.
std::string_view ErrorName(aclError code);
std::string ErrorMeaning(aclError code);

// What an aclError says about whom to blame and what to do (the diagnostics notes: classify
// first). The table, with HTTP/gRPC statuses and breaker effects, is in docs/ASCEND.md.
struct ErrorClass {
  std::string_view name;  // "device memory", "device timeout", "model mismatch", ...
  StatusCode status;      // Unavailable/Internal: a breaker failure; DeadlineExceeded: a timeout
  std::string_view hint;  // the remediation, appended to the error message
};
const ErrorClass& ClassOf(aclError code);
StatusCode ErrorStatusCode(aclError code);  // ClassOf(code).status

// Where mmserve looks for libascendcl.so, in order: $MMSERVE_ACL_LIBRARY (a file),
// $ASCEND_HOME_PATH/lib64/libascendcl.so, CANN's default install, then the loader's path.
std::vector<std::string> DefaultLibraryCandidates();

struct AclApi {
#define MMS_ACL_POINTER(required, ret, name, params) ret(*name) params = nullptr;
  MMS_ACL_FUNCTIONS(MMS_ACL_POINTER)
#undef MMS_ACL_POINTER

  std::string library;  // the candidate that loaded

  // Opens the first candidate that loads and resolves every required entry point. The library
  // stays loaded for the life of the process (unloading AscendCL is not supported). Errors say
  // "AscendCL not found" with every place tried, or which entry point is missing.
  static Result<std::shared_ptr<const AclApi>> Open(const std::vector<std::string>& candidates);

  // A failed call as a Status: "<what>: <call> returned 207001 ACL_ERROR_RT_MEMORY_ALLOCATION
  // (device memory allocation failed); AscendCL says: <aclGetRecentErrMsg text>". Reads (and so
  // clears) the calling thread's recent error message.
  Status Error(std::string_view what, std::string_view call, aclError code) const;
  // The calling thread's recent error text ("" when none), cleared by reading.
  std::string RecentError() const;
};

}  // namespace mmserve::acl
