#include "backend/acl/acl_model_desc.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace mmserve {

using acl::aclError;
using acl::AclApi;

namespace {

// Input or output `i` of the description: its name, datatype and dims, checked to be what
// mmserve can batch (a batch dimension first, the others fixed).
Result<AclTensor> ReadTensor(const AclApi& api, acl::aclmdlDesc* desc, const std::string& model,
                             bool input, size_t i) {
  acl::aclmdlIODims dims{};
  const aclError rc = input ? api.aclmdlGetInputDims(desc, i, &dims)
                            : api.aclmdlGetOutputDims(desc, i, &dims);
  if (rc != acl::kSuccess) {
    return api.Error("reading the description of '" + model + "'",
                     input ? "aclmdlGetInputDims" : "aclmdlGetOutputDims", rc);
  }
  const char* name = input ? api.aclmdlGetInputNameByIndex(desc, i)
                           : api.aclmdlGetOutputNameByIndex(desc, i);
  AclTensor t{.name = name ? name : (input ? "input" : "output") + std::to_string(i)};
  const int acl_type = input ? api.aclmdlGetInputDataType(desc, i)
                             : api.aclmdlGetOutputDataType(desc, i);
  auto type = KServeType(acl_type);
  if (!type) {
    return FailedPrecondition("model '" + model + "': " + (input ? "input" : "output") + " '" +
                              t.name + "' has AscendCL datatype " + std::to_string(acl_type) +
                              ", which mmserve cannot carry over KServe v2");
  }
  t.type = *type;
  if (dims.dimCount == 0 || dims.dimCount > acl::kMaxDimCount) {
    return FailedPrecondition("model '" + model + "': tensor '" + t.name +
                              "' has no batch dimension (a scalar); mmserve batches on dims[0]");
  }
  t.dims.assign(dims.dims, dims.dims + dims.dimCount);
  size_t row = DataTypeSize(t.type);
  for (size_t d = 1; d < t.dims.size(); ++d) {
    if (t.dims[d] <= 0) {
      return FailedPrecondition("model '" + model + "': tensor '" + t.name + "' has shape " +
                                ShapeToString(t.dims) +
                                "; only the batch dimension may vary (dynamic image size and "
                                "dynamic dims are not supported)");
    }
    row *= static_cast<size_t>(t.dims[d]);
  }
  t.row_bytes = row;
  return t;
}

}  // namespace

std::optional<DataType> KServeType(int acl_type) {
  switch (acl_type) {
    case acl::kAclFloat: return DataType::kFp32;
    case acl::kAclFloat16: return DataType::kFp16;
    case acl::kAclBf16: return DataType::kBf16;
    case acl::kAclDouble: return DataType::kFp64;
    case acl::kAclInt8: return DataType::kInt8;
    case acl::kAclInt16: return DataType::kInt16;
    case acl::kAclInt32: return DataType::kInt32;
    case acl::kAclInt64: return DataType::kInt64;
    case acl::kAclUint8: return DataType::kUint8;
    case acl::kAclUint16: return DataType::kUint16;
    case acl::kAclUint32: return DataType::kUint32;
    case acl::kAclUint64: return DataType::kUint64;
    case acl::kAclBool: return DataType::kBool;
    default: return std::nullopt;
  }
}

Result<AclModelInfo> ReadDescription(const AclApi& api, acl::aclmdlDesc* desc,
                                     const std::string& model) {
  AclModelInfo info;

  size_t dynamic_index = SIZE_MAX;
  if (api.aclmdlGetInputIndexByName(desc, acl::kDynamicTensorName, &dynamic_index) !=
      acl::kSuccess) {
    dynamic_index = SIZE_MAX;
  }
  const size_t n_in = api.aclmdlGetNumInputs(desc);
  for (size_t i = 0; i < n_in; ++i) {
    if (i == dynamic_index) continue;
    MMS_ASSIGN_OR_RETURN(AclTensor t, ReadTensor(api, desc, model, true, i));
    info.inputs.push_back(std::move(t));
  }
  for (size_t i = 0; i < api.aclmdlGetNumOutputs(desc); ++i) {
    MMS_ASSIGN_OR_RETURN(AclTensor t, ReadTensor(api, desc, model, false, i));
    info.outputs.push_back(std::move(t));
  }
  if (info.outputs.empty()) return FailedPrecondition("model '" + model + "' has no outputs");
  acl::aclmdlBatch batch{};
  if (api.aclmdlGetDynamicBatch(desc, &batch) == acl::kSuccess && batch.batchCount > 0) {
    for (size_t i = 0; i < batch.batchCount && i < acl::kMaxBatchCount; ++i) {
      info.gears.push_back(static_cast<int>(batch.batch[i]));
    }
    std::sort(info.gears.begin(), info.gears.end());
    info.dynamic = true;
    if (dynamic_index == SIZE_MAX) {
      return FailedPrecondition("model '" + model + "' has dynamic batch gears but no " +
                                std::string(acl::kDynamicTensorName) + " input");
    }
  } else {
    (void)api.RecentError();
    const Shape& first = (info.inputs.empty() ? info.outputs : info.inputs).front().dims;
    info.gears = {static_cast<int>(std::max<int64_t>(1, first[0]))};
  }
  for (const auto* list : {&info.inputs, &info.outputs}) {
    for (const auto& t : *list) {
      if (info.dynamic ? t.dims[0] != -1 : t.dims[0] != info.gears[0]) {
        return FailedPrecondition("model '" + model + "': tensor '" + t.name + "' has shape " +
                                  ShapeToString(t.dims) + ", whose first dimension is not the "
                                  "batch of the other tensors");
      }
    }
  }
  return info;
}

// The description without an instance: aclmdlGetDescFromFile where the library has it, else a
// load in a scratch context on the calling (loader) thread. REQUIRES: the device bound.
Result<AclModelInfo> Describe(const AclApi& api, const ModelConfig& model, bool scratch_load) {
  const std::string path = model.path.string();
  acl::aclmdlDesc* desc = api.aclmdlCreateDesc();
  if (!desc) return ResourceExhausted("aclmdlCreateDesc returned null");
  Result<AclModelInfo> info = Internal("unread");
  aclError rc = api.aclmdlGetDescFromFile ? api.aclmdlGetDescFromFile(desc, path.c_str())
                                          : acl::kErrorApiNotSupport;
  if (rc == acl::kSuccess) {
    info = ReadDescription(api, desc, model.name);
  } else if (rc == acl::kErrorApiNotSupport && !scratch_load) {
    (void)api.RecentError();
    info = Unimplemented("aclmdlGetDescFromFile is not supported by this CANN");
  } else if (rc == acl::kErrorApiNotSupport) {
    (void)api.RecentError();
    acl::aclrtContext scratch = nullptr;
    rc = api.aclrtCreateContext(&scratch, model.device_id);
    if (rc != acl::kSuccess) {
      info = api.Error("reading '" + path + "'", "aclrtCreateContext", rc);
    } else {
      uint32_t id = 0;
      rc = api.aclmdlLoadFromFile(path.c_str(), &id);
      if (rc != acl::kSuccess) {
        info = api.Error("loading '" + path + "' to read its description", "aclmdlLoadFromFile", rc);
      } else {
        rc = api.aclmdlGetDesc(desc, id);
        info = rc == acl::kSuccess ? ReadDescription(api, desc, model.name)
                                   : Result<AclModelInfo>(api.Error("reading '" + path + "'",
                                                                    "aclmdlGetDesc", rc));
        if (api.aclmdlUnload(id) != acl::kSuccess) (void)api.RecentError();
      }
      if (api.aclrtDestroyContext(scratch) != acl::kSuccess) (void)api.RecentError();
    }
  } else {
    info = api.Error("reading '" + path + "'", "aclmdlGetDescFromFile", rc);
  }
  (void)api.aclmdlDestroyDesc(desc);
  return info;
}

Status CheckBatching(const ModelConfig& model, const AclModelInfo& info) {
  const std::string file = "'" + model.path.filename().string() + "'";
  auto list = [](const std::vector<int>& v) {
    std::string out;
    for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
    return "[" + out + "]";
  };
  if (!info.dynamic) {
    const int batch = info.gears.front();
    const std::string fixed = file + " is compiled for a static batch of " +
                              std::to_string(batch) + " (every execution runs " +
                              std::to_string(batch) + " rows, padded)";
    if (model.dynamic_batch == true) {
      return InvalidArgument("dynamic_batch: true, but " + fixed +
                             ": convert it with atc --dynamic_batch_size, or drop dynamic_batch");
    }
    if (model.batch_size_set && model.batch_size != batch) {
      return InvalidArgument("batch_size: " + std::to_string(model.batch_size) + ", but " +
                             fixed);
    }
    if (!model.batch_tiers.empty() && model.batch_tiers != std::vector<int>{batch}) {
      return InvalidArgument("batch_tiers: " + list(model.batch_tiers) + ", but " + fixed);
    }
    return Status::Ok();
  }
  const auto gear = [&](int n) {
    return std::find(info.gears.begin(), info.gears.end(), n) != info.gears.end();
  };
  for (int tier : model.batch_tiers) {
    if (!gear(tier)) {
      return InvalidArgument("batch_tiers: " + list(model.batch_tiers) + ", but " +
                             std::to_string(tier) + " is not a gear of " + file + " (its gears: " +
                             list(info.gears) + ")");
    }
  }
  if (model.batch_size_set && !gear(model.batch_size)) {
    return InvalidArgument("batch_size: " + std::to_string(model.batch_size) +
                           ", but it is not a gear of " + file + " (its gears: " +
                           list(info.gears) + ")");
  }
  return Status::Ok();
}

namespace {

// The expected SoC: params.soc_version, else the sidecar file next to the model, else none.
std::string ExpectedSoc(const ModelConfig& model, const std::string& declared,
                        std::string* source) {
  if (!declared.empty()) {
    *source = "params.soc_version";
    return declared;
  }
  std::filesystem::path sidecar = model.path;
  sidecar.replace_extension(".soc_version");
  std::ifstream in(sidecar);
  std::string soc;
  if (in && std::getline(in, soc)) {
    soc.erase(soc.find_last_not_of(" \t\r\n") + 1);
    *source = sidecar.string();
    return soc;
  }
  return "";
}

}  // namespace

Status CheckSoc(const AclApi& api, const ModelConfig& model, const std::string& declared) {
  std::string source;
  const std::string expected = ExpectedSoc(model, declared, &source);
  if (expected.empty() || !api.aclrtGetSocName) return Status::Ok();
  const char* name = api.aclrtGetSocName();
  if (!name) return Status::Ok();  // the device cannot say; the load itself still checks
  const std::string actual = name;
  if (actual == expected) return Status::Ok();
  return FailedPrecondition("model '" + model.name + "' was compiled for SoC " + expected +
                            " (" + source + ") but this device is " + actual +
                            ": convert it again with atc --soc_version=" + actual);
}

}  // namespace mmserve
