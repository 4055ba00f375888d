// What an OM model's description says, read through AscendCL before any instance exists: its
// inputs and outputs as KServe tensors, its batch gears, its sizes. Describe() reads it from the
// file (aclmdlGetDescFromFile), or from a scratch load where the library lacks that call.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/tensor.h"
#include "config/model_config.h"
#include "runtime/acl/acl_api.h"

namespace mmserve {

// The KServe datatype of an AscendCL aclDataType; nullopt for those KServe cannot carry.
std::optional<DataType> KServeType(int acl_type);

// One input or output of the model, as its description says.
struct AclTensor {
  std::string name;
  DataType type = DataType::kFp32;
  Shape dims;             // as compiled; dims[0] is the batch (-1 with dynamic batch)
  size_t row_bytes = 0;   // bytes per batch row
};

// What a session knows of its model before any instance exists.
struct AclModelInfo {
  std::vector<AclTensor> inputs;   // without the dynamic-batch input
  std::vector<AclTensor> outputs;
  std::vector<int> gears;          // ascending; a static model: {its batch}
  bool dynamic = false;            // the gears are selectable (aclmdlSetDynamicBatchSize)
  size_t work_size = 0;
  size_t weight_size = 0;
  int max_rows() const { return gears.back(); }
};

// The description behind `desc`, checked: every tensor batches on dims[0] (one gear for a static
// model, -1 with dynamic batch), the dynamic-batch input is kept out of `inputs`.
Result<AclModelInfo> ReadDescription(const acl::AclApi& api, acl::aclmdlDesc* desc,
                                     const std::string& model);
// Whether the config's batching fits the OM: a static OM (one compiled batch B) takes no
// dynamic_batch: true, and batch_size / batch_tiers can only be B (every execution runs B rows,
// padded); a dynamic OM's batch_tiers and batch_size must be among its gears.
Status CheckBatching(const ModelConfig& model, const AclModelInfo& info);

// The model's SoC — params.soc_version (`declared`), else the sidecar <model>.soc_version —
// against aclrtGetSocName(); FailedPrecondition naming both when they differ, OK when either
// is unknown (the load itself still checks).
Status CheckSoc(const acl::AclApi& api, const ModelConfig& model, const std::string& declared);

// The description without an instance: aclmdlGetDescFromFile, else (with `scratch_load`) a load
// in a scratch context — else Unimplemented. REQUIRES: the device bound on the calling thread.
Result<AclModelInfo> Describe(const acl::AclApi& api, const ModelConfig& model,
                              bool scratch_load = true);

}  // namespace mmserve
