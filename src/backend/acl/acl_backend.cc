#include "backend/acl/acl_backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/logging.h"
#include "common/strings.h"
#include "backend/acl/acl_model_desc.h"

namespace mmserve {
namespace {

// Held by every device allocation of this backend, so that a load's footprint can be read from
// the device's free memory before and after it.
std::mutex& DeviceAllocationMutex() {
  static std::mutex mu;
  return mu;
}

using namespace std::chrono_literals;
using acl::aclError;
using acl::AclApi;
using ApiPtr = std::shared_ptr<const AclApi>;

constexpr auto kSyncSlice = 50ms;  // how often a waiting worker looks for an abort

struct AclOptions {
  bool pool = false;
  std::string soc_version;
  std::chrono::milliseconds sync_timeout{10'000};
};

AclOptions ReadOptions(const ModelConfig& model, ConfigErrors& errors) {
  ParamReader r(model.params, errors);
  AclOptions o;
  o.pool = r.String("memory", "independent", {"independent", "pool"}) == "pool";
  o.soc_version = r.String("soc_version", "");
  o.sync_timeout = std::chrono::milliseconds(r.Int("sync_timeout_ms", 10'000, 0, 3'600'000));
  r.Finish();
  return o;
}

// Binds `device` to the calling thread for a scope (aclrtSetDevice ... aclrtResetDevice).
class DeviceBinding {
 public:
  static Result<DeviceBinding> Bind(ApiPtr api, int device, std::string_view what) {
    if (aclError rc = api->aclrtSetDevice(device); rc != acl::kSuccess) {
      return api->Error(what, "aclrtSetDevice", rc);
    }
    return DeviceBinding(std::move(api), device);
  }
  DeviceBinding(DeviceBinding&& other) noexcept
      : api_(std::move(other.api_)), device_(std::exchange(other.device_, -1)) {}
  DeviceBinding(const DeviceBinding&) = delete;
  DeviceBinding& operator=(const DeviceBinding&) = delete;
  DeviceBinding& operator=(DeviceBinding&&) = delete;
  ~DeviceBinding() {
    if (device_ >= 0 && api_->aclrtResetDevice(device_) != acl::kSuccess) {
      spdlog::warn("acl: aclrtResetDevice({}): {}", device_, api_->RecentError());
    }
  }

 private:
  DeviceBinding(ApiPtr api, int device) : api_(std::move(api)), device_(device) {}
  ApiPtr api_;
  int device_;
};

// Reads a description into AclModelInfo (excluding the dynamic-batch input).
class AclSession;

// One worker's execution state: its context, stream, model id and I/O buffers. Created and
// destroyed on its worker thread; only Abort() comes from another thread.
class AclInstance final : public Instance {
 public:
  AclInstance(AclSession& session, int index) : session_(session), index_(index) {}
  ~AclInstance() override { Teardown(); }

  Status Create();
  Status Execute(Execution& execution) override;
  bool Abort() override {
    aborted_.store(true);
    return true;
  }

 private:
  struct Buffer {
    void* device = nullptr;
    size_t size = 0;
    acl::aclDataBuffer* wrapper = nullptr;
    void* host = nullptr;  // pinned staging of the same size (not for the dynamic input)
  };

  Status Call(std::string_view what, std::string_view call, aclError rc) const;
  // Loads the model (with pool memory or not), charging what the device's free memory says the
  // load took — not what aclmdlQuerySize promised.
  Status LoadMeasured();
  Status AddBuffer(acl::aclmdlDataset* dataset, size_t size, bool staged, std::vector<Buffer>& out);
  Status RunChunk(Execution& execution, std::span<BatchItem*> chunk, int rows);
  Status Synchronize(Clock::time_point deadline);
  void Teardown();

  AclSession& session_;
  const int index_;
  std::optional<DeviceBinding> binding_;
  acl::aclrtContext context_ = nullptr;
  acl::aclrtStream stream_ = nullptr;
  void* work_ = nullptr;  // pool mode: this load's work memory
  bool loaded_ = false;
  uint32_t model_id_ = 0;
  acl::aclmdlDesc* desc_ = nullptr;
  acl::aclmdlDataset* inputs_ = nullptr;
  acl::aclmdlDataset* outputs_ = nullptr;
  std::vector<Buffer> in_;   // model input order, the dynamic-batch input included
  std::vector<Buffer> out_;
  size_t dynamic_index_ = SIZE_MAX;
  int64_t device_bytes_ = 0;
  bool hung_ = false;  // the stream never completed: do not wait for it at teardown
  std::atomic<bool> aborted_{false};
};

class AclSession final : public Session {
 public:
  AclSession(ApiPtr api, ModelConfig model, AclOptions options, AclModelInfo info,
             ModelSignature signature)
      : api_(std::move(api)),
        model_(std::move(model)),
        options_(std::move(options)),
        info_(std::move(info)),
        signature_(std::move(signature)) {}
  ~AclSession() override {
    if (!weights_) return;
    // Pool mode: the shared weights go after every instance's unload.
    auto bound = DeviceBinding::Bind(api_, model_.device_id, "freeing model weights");
    if (!bound.ok() || api_->aclrtFree(weights_) != acl::kSuccess) {
      spdlog::warn("acl: model {}: freeing its weight memory: {}", model_.name, api_->RecentError());
    }
  }

  // Pool mode: allocates the weights once on the loader thread (the device bound).
  Status AllocateWeights() {
    if (!options_.pool || info_.weight_size == 0) return Status::Ok();
    std::lock_guard lock(DeviceAllocationMutex());
    const aclError rc = api_->aclrtMalloc(&weights_, info_.weight_size, acl::kMemMallocHugeFirst);
    if (rc != acl::kSuccess) {
      weights_ = nullptr;
      return api_->Error("allocating the weight memory of '" + model_.name + "'", "aclrtMalloc", rc);
    }
    device_bytes_ += static_cast<int64_t>(info_.weight_size);
    return Status::Ok();
  }

  const ModelSignature& signature() const override { return signature_; }
  int64_t resident_bytes() const override { return device_bytes_.load(); }
  std::vector<int> batch_tiers() const override { return info_.gears; }
  // Every worker's stream feeds the same AI cores.
  bool executions_share_device() const override { return true; }
  // The first execution at each gear pays for kernel selection and memory setup: on by default.
  int default_warmup() const override { return 1; }
  Result<std::unique_ptr<Instance>> CreateInstance(int index) override {
    auto instance = std::make_unique<AclInstance>(*this, index);
    MMS_RETURN_IF_ERROR(instance->Create());
    return std::unique_ptr<Instance>(std::move(instance));
  }
  void Interrupt() override { interrupted_.store(true); }
  std::map<std::string, int64_t> counters() const override {
    std::lock_guard lock(mu_);
    auto out = counters_;
    out["device_bytes"] = device_bytes_.load();
    return out;
  }

  const ApiPtr& api() const { return api_; }
  const ModelConfig& model() const { return model_; }
  const AclOptions& options() const { return options_; }
  const AclModelInfo& info() const { return info_; }
  void* weights() const { return weights_; }
  bool interrupted() const { return interrupted_.load(); }
  void AddDeviceBytes(int64_t bytes) { device_bytes_ += bytes; }
  void Count(int gear, int rows) {
    std::lock_guard lock(mu_);
    ++counters_["executions"];
    counters_["rows"] += rows;
    counters_["padded_rows"] += gear - rows;
    ++counters_["gear_" + std::to_string(gear)];
  }

 private:
  const ApiPtr api_;
  const ModelConfig model_;
  const AclOptions options_;
  const AclModelInfo info_;
  const ModelSignature signature_;
  void* weights_ = nullptr;  // pool mode
  std::atomic<int64_t> device_bytes_{0};
  std::atomic<bool> interrupted_{false};
  mutable std::mutex mu_;
  std::map<std::string, int64_t> counters_;  // guarded by mu_
};

Status AclInstance::Call(std::string_view what, std::string_view call, aclError rc) const {
  if (rc == acl::kSuccess) return Status::Ok();
  return session_.api()->Error("model '" + session_.model().name + "' instance " +
                                   std::to_string(index_) + ": " + std::string(what),
                               call, rc);
}

Status AclInstance::AddBuffer(acl::aclmdlDataset* dataset, size_t size, bool staged,
                              std::vector<Buffer>& out) {
  const AclApi& api = *session_.api();
  Buffer& b = out.emplace_back();
  b.size = std::max<size_t>(size, 1);
  {
    std::lock_guard lock(DeviceAllocationMutex());
    MMS_RETURN_IF_ERROR(Call("allocating an I/O buffer", "aclrtMalloc",
                             api.aclrtMalloc(&b.device, b.size, acl::kMemMallocHugeFirst)));
  }
  device_bytes_ += static_cast<int64_t>(b.size);
  session_.AddDeviceBytes(static_cast<int64_t>(b.size));
  b.wrapper = api.aclCreateDataBuffer(b.device, b.size);
  if (!b.wrapper) return ResourceExhausted("aclCreateDataBuffer returned null");
  MMS_RETURN_IF_ERROR(Call("building a dataset", "aclmdlAddDatasetBuffer",
                           api.aclmdlAddDatasetBuffer(dataset, b.wrapper)));
  if (staged) {
    MMS_RETURN_IF_ERROR(Call("allocating pinned host memory", "aclrtMallocHost",
                             api.aclrtMallocHost(&b.host, b.size)));
  }
  return Status::Ok();
}

Status AclInstance::Create() {
  const AclApi& api = *session_.api();
  const ModelConfig& m = session_.model();
  const std::string path = m.path.string();
  // This worker thread's own device binding, context and stream.
  auto binding = DeviceBinding::Bind(session_.api(), m.device_id, "binding the worker's device");
  if (!binding.ok()) return binding.status();
  binding_.emplace(std::move(*binding));
  MMS_RETURN_IF_ERROR(Call("creating its context", "aclrtCreateContext",
                           api.aclrtCreateContext(&context_, m.device_id)));
  MMS_RETURN_IF_ERROR(Call("creating its stream", "aclrtCreateStream", api.aclrtCreateStream(&stream_)));
  MMS_RETURN_IF_ERROR(LoadMeasured());
  desc_ = api.aclmdlCreateDesc();
  if (!desc_) return ResourceExhausted("aclmdlCreateDesc returned null");
  MMS_RETURN_IF_ERROR(Call("reading its description", "aclmdlGetDesc", api.aclmdlGetDesc(desc_, model_id_)));
  if (api.aclmdlGetInputIndexByName(desc_, acl::kDynamicTensorName, &dynamic_index_) != acl::kSuccess) {
    dynamic_index_ = SIZE_MAX;
  }
  inputs_ = api.aclmdlCreateDataset();
  outputs_ = api.aclmdlCreateDataset();
  if (!inputs_ || !outputs_) return ResourceExhausted("aclmdlCreateDataset returned null");
  // Every buffer once, at the largest gear's size: requests reuse them.
  for (size_t i = 0; i < api.aclmdlGetNumInputs(desc_); ++i) {
    MMS_RETURN_IF_ERROR(AddBuffer(inputs_, api.aclmdlGetInputSizeByIndex(desc_, i),
                                  i != dynamic_index_, in_));
  }
  for (size_t i = 0; i < api.aclmdlGetNumOutputs(desc_); ++i) {
    MMS_RETURN_IF_ERROR(AddBuffer(outputs_, api.aclmdlGetOutputSizeByIndex(desc_, i), true, out_));
  }
  const auto& info = session_.info();
  const size_t rows = static_cast<size_t>(info.max_rows());
  for (size_t i = 0, k = 0; i < in_.size(); ++i) {
    if (i == dynamic_index_) continue;
    if (in_[i].size < info.inputs[k++].row_bytes * rows) {
      return FailedPrecondition("model '" + m.name + "': input buffer " + std::to_string(i) +
                                " is smaller than its largest batch");
    }
  }
  return Status::Ok();
}

Status AclInstance::LoadMeasured() {
  const AclApi& api = *session_.api();
  const std::string path = session_.model().path.string();
  // No other allocation of this process runs meanwhile, so the change in free memory is this
  // load's (another process allocating on the device at the same moment would still show).
  std::lock_guard lock(DeviceAllocationMutex());
  size_t free_before = 0, free_after = 0, total = 0;
  const bool measured_before = api.aclrtGetMemInfo(acl::kHbmMem, &free_before, &total) == acl::kSuccess;
  (void)api.RecentError();
  int64_t promised = 0;
  if (session_.options().pool) {
    const size_t work = session_.info().work_size;
    if (work > 0) {
      MMS_RETURN_IF_ERROR(Call("allocating work memory", "aclrtMalloc",
                               api.aclrtMalloc(&work_, work, acl::kMemMallocHugeFirst)));
      promised += static_cast<int64_t>(work);
    }
    MMS_RETURN_IF_ERROR(Call("loading " + path, "aclmdlLoadFromFileWithMem",
                             api.aclmdlLoadFromFileWithMem(path.c_str(), &model_id_, work_, work,
                                                           session_.weights(),
                                                           session_.info().weight_size)));
  } else {
    MMS_RETURN_IF_ERROR(Call("loading " + path, "aclmdlLoadFromFile",
                             api.aclmdlLoadFromFile(path.c_str(), &model_id_)));
    promised = static_cast<int64_t>(session_.info().work_size + session_.info().weight_size);
  }
  loaded_ = true;
  const bool measured_after = api.aclrtGetMemInfo(acl::kHbmMem, &free_after, &total) == acl::kSuccess;
  (void)api.RecentError();
  int64_t took = promised;
  if (measured_before && measured_after && free_before >= free_after) {
    took = static_cast<int64_t>(free_before - free_after);
    if (took != promised) {
      spdlog::debug("acl: model {} instance {}: the load took {} ({} B) on the device, "
                    "aclmdlQuerySize said {} ({} B)",
                    session_.model().name, index_, FormatMib(took), took, FormatMib(promised),
                    promised);
    }
  }
  device_bytes_ += took;
  session_.AddDeviceBytes(took);
  return Status::Ok();
}

void AclInstance::Teardown() {
  if (!binding_) return;
  const AclApi& api = *session_.api();
  auto check = [&](const char* call, aclError rc) {
    if (rc != acl::kSuccess) {
      spdlog::warn("acl: model {} instance {}: teardown: {} returned {} {}: {}",
                   session_.model().name, index_, call, rc, acl::ErrorName(rc), api.RecentError());
    }
  };
  if (context_) check("aclrtSetCurrentContext", api.aclrtSetCurrentContext(context_));
  // Nothing may still write into the buffers about to be freed (unless the stream hung).
  if (stream_ && !hung_) check("aclrtSynchronizeStreamWithTimeout", api.aclrtSynchronizeStreamWithTimeout(stream_, 5'000));
  // 1. buffers, then the datasets
  for (auto* list : {&in_, &out_}) {
    for (Buffer& b : *list) {
      if (b.device) check("aclrtFree", api.aclrtFree(b.device));
      if (b.wrapper) check("aclDestroyDataBuffer", api.aclDestroyDataBuffer(b.wrapper));
      if (b.host) check("aclrtFreeHost", api.aclrtFreeHost(b.host));
    }
    list->clear();
  }
  if (inputs_) check("aclmdlDestroyDataset", api.aclmdlDestroyDataset(inputs_));
  if (outputs_) check("aclmdlDestroyDataset", api.aclmdlDestroyDataset(outputs_));
  // 2. the description, 3. the model (then the work memory it ran in)
  if (desc_) check("aclmdlDestroyDesc", api.aclmdlDestroyDesc(desc_));
  if (loaded_) check("aclmdlUnload", api.aclmdlUnload(model_id_));
  if (work_) check("aclrtFree", api.aclrtFree(work_));
  // 4. the stream, 5. the context, 6. the device reference (binding_)
  if (stream_) check("aclrtDestroyStream", api.aclrtDestroyStream(stream_));
  if (context_) check("aclrtDestroyContext", api.aclrtDestroyContext(context_));
  session_.AddDeviceBytes(-device_bytes_);
  binding_.reset();
}

Status AclInstance::Synchronize(Clock::time_point deadline) {
  const AclApi& api = *session_.api();
  const auto bound = deadline == Clock::time_point::max()
                         ? Clock::time_point::max()
                         : deadline + session_.options().sync_timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(bound - Clock::now());
    const auto slice = std::clamp<std::chrono::milliseconds>(left, 1ms, kSyncSlice);
    const aclError rc = api.aclrtSynchronizeStreamWithTimeout(stream_, static_cast<int32_t>(slice.count()));
    if (rc == acl::kSuccess) return Status::Ok();
    if (rc != acl::kErrorRtStreamSyncTimeout && rc != acl::kErrorRtTaskTimeout) {
      return Call("waiting for its stream", "aclrtSynchronizeStreamWithTimeout", rc);
    }
    if (aborted_.load() || session_.interrupted()) {
      (void)api.RecentError();
      hung_ = true;
      return DeadlineExceeded("model '" + session_.model().name +
                              "': the stream did not complete (" +
                              std::string(acl::ErrorName(rc)) + "); the execution was abandoned");
    }
    if (Clock::now() >= bound) {
      hung_ = true;
      return Call("waiting for its stream past the deadline + sync_timeout_ms",
                  "aclrtSynchronizeStreamWithTimeout", rc);
    }
    (void)api.RecentError();  // the slice's timeout text
  }
}

Status AclInstance::RunChunk(Execution& execution, std::span<BatchItem*> chunk, int rows) {
  const AclApi& api = *session_.api();
  const AclModelInfo& info = session_.info();
  const int gear = *std::lower_bound(info.gears.begin(), info.gears.end(), rows);
  // Preprocess: each input's rows into its pinned staging buffer, zeros up to the gear.
  execution.set_stage(Stage::kPreprocess);
  for (size_t i = 0, k = 0; i < in_.size(); ++i) {
    if (i == dynamic_index_) continue;
    const AclTensor& spec = info.inputs[k++];
    char* host = static_cast<char*>(in_[i].host);
    size_t at = 0;
    for (BatchItem* item : chunk) {
      const std::string& data = item->request->input(spec.name)->data();
      std::memcpy(host + at, data.data(), data.size());
      at += data.size();
    }
    const size_t bytes = spec.row_bytes * static_cast<size_t>(gear);
    std::memset(host + at, 0, bytes - at);
    MMS_RETURN_IF_ERROR(Call("copying input '" + spec.name + "' to the device", "aclrtMemcpy",
                             api.aclrtMemcpy(in_[i].device, in_[i].size, host, bytes,
                                             acl::kMemcpyHostToDevice)));
  }
  if (info.dynamic) {
    MMS_RETURN_IF_ERROR(Call("selecting batch gear " + std::to_string(gear),
                             "aclmdlSetDynamicBatchSize",
                             api.aclmdlSetDynamicBatchSize(model_id_, inputs_, dynamic_index_,
                                                           static_cast<uint64_t>(gear))));
  }
  // Execute on this instance's stream, bounded by the batch's latest deadline.
  execution.set_stage(Stage::kExecute);
  MMS_RETURN_IF_ERROR(Call("executing", "aclmdlExecuteAsync",
                           api.aclmdlExecuteAsync(model_id_, inputs_, outputs_, stream_)));
  Clock::time_point deadline = Clock::time_point::min();
  for (BatchItem* item : chunk) deadline = std::max(deadline, item->request->deadline);
  MMS_RETURN_IF_ERROR(Synchronize(deadline));
  // Postprocess: each output back, split into each request's rows.
  execution.set_stage(Stage::kPostprocess);
  std::vector<InferResponse> responses(chunk.size());
  for (size_t o = 0; o < out_.size(); ++o) {
    const AclTensor& spec = info.outputs[o];
    const size_t bytes = spec.row_bytes * static_cast<size_t>(gear);
    MMS_RETURN_IF_ERROR(Call("copying output '" + spec.name + "' from the device", "aclrtMemcpy",
                             api.aclrtMemcpy(out_[o].host, out_[o].size, out_[o].device, bytes,
                                             acl::kMemcpyDeviceToHost)));
    const char* host = static_cast<const char*>(out_[o].host);
    size_t at = 0;
    for (size_t r = 0; r < chunk.size(); ++r) {
      const int64_t n = chunk[r]->request->input(info.inputs.front().name)->shape()[0];
      Shape shape = spec.dims;
      shape[0] = n;
      const size_t size = spec.row_bytes * static_cast<size_t>(n);
      responses[r].outputs.emplace_back(spec.name, spec.type, std::move(shape),
                                        std::string(host + at, size));
      at += size;
    }
  }
  for (size_t r = 0; r < chunk.size(); ++r) chunk[r]->result = std::move(responses[r]);
  session_.Count(gear, rows);
  return Status::Ok();
}

Status AclInstance::Execute(Execution& execution) {
  const AclApi& api = *session_.api();
  const AclModelInfo& info = session_.info();
  MMS_RETURN_IF_ERROR(Call("binding its context", "aclrtSetCurrentContext",
                           api.aclrtSetCurrentContext(context_)));
  // Each request's rows: the same in every input, at most the largest gear.
  std::vector<std::pair<BatchItem*, int>> runnable;
  for (BatchItem& item : execution.items) {
    int64_t rows = -1;
    Status bad;
    if (info.inputs.empty()) rows = 1;  // a model without inputs: one row per request
    for (const AclTensor& spec : info.inputs) {
      const Tensor* t = item.request->input(spec.name);
      if (!t || t->shape().empty()) {
        bad = InvalidArgument("input '" + spec.name + "' is required");
        break;
      }
      if (rows >= 0 && t->shape()[0] != rows) {
        bad = InvalidArgument("input '" + spec.name + "' has " + std::to_string(t->shape()[0]) +
                              " rows, the other inputs " + std::to_string(rows) +
                              ": every input needs the same first dimension");
        break;
      }
      rows = t->shape()[0];
    }
    if (bad.ok() && (rows < 1 || rows > info.max_rows())) {
      bad = InvalidArgument("a request to '" + session_.model().name + "' may carry 1.." +
                            std::to_string(info.max_rows()) +
                            " rows (the model's largest batch), not " + std::to_string(rows));
    }
    if (!bad.ok()) {
      item.result = bad;
      continue;
    }
    runnable.emplace_back(&item, static_cast<int>(rows));
  }
  // Consecutive requests in chunks that fit the largest gear.
  size_t begin = 0;
  while (begin < runnable.size()) {
    size_t end = begin;
    int rows = 0;
    while (end < runnable.size() && rows + runnable[end].second <= info.max_rows()) {
      rows += runnable[end++].second;
    }
    std::vector<BatchItem*> chunk;
    for (size_t i = begin; i < end; ++i) chunk.push_back(runnable[i].first);
    MMS_RETURN_IF_ERROR(RunChunk(execution, chunk, rows));
    begin = end;
  }
  return Status::Ok();
}

}  // namespace

void AclBackend::Validate(ModelConfig& model, ConfigErrors& errors) const {
  const AclOptions o = ReadOptions(model, errors);
  // With AscendCL on this host, the model's declared SoC against the device's, before anything
  // loads (aclrtGetSocName needs no aclInit). Without it, the load reports AscendCL missing.
  if (model.path.empty()) return;
  auto api = runtime_.Api();
  if (!api.ok()) return;
  if (Status soc = CheckSoc(**api, model, o.soc_version); !soc.ok()) {
    errors.Add({.where = model.where,
                .field = model.Field(o.soc_version.empty() ? "path" : "params.soc_version"),
                .expected = "an OM compiled for this device's SoC",
                .found = std::string(soc.message())});
  }
}

Result<MemoryEstimate> AclBackend::Estimate(const ModelConfig& model) const {
  ConfigErrors errors;
  const AclOptions o = ReadOptions(model, errors);
  MMS_RETURN_IF_ERROR(errors.ToStatus());
  MMS_ASSIGN_OR_RETURN(ApiPtr api, runtime_.Api());
  size_t work = 0, weight = 0;
  const std::string path = model.path.string();
  if (aclError rc = api->aclmdlQuerySize(path.c_str(), &work, &weight); rc != acl::kSuccess) {
    return api->Error("sizing '" + path + "'", "aclmdlQuerySize", rc);
  }
  {
    // The batching the config asks for against the OM's, so that the plan (validate, serve's
    // preflight) catches what the load would refuse — where the description is cheap to read.
    // Without aclmdlGetDescFromFile it would take a whole scratch load: Load() checks then.
    MMS_ASSIGN_OR_RETURN(DeviceBinding bound,
                         DeviceBinding::Bind(api, model.device_id, "describing " + path));
    auto info = Describe(*api, model, /*scratch_load=*/false);
    if (info.ok()) {
      MMS_RETURN_IF_ERROR(CheckBatching(model, *info));
    } else if (info.status().code() != StatusCode::kUnimplemented) {
      return info.status();
    }
  }
  const auto n = static_cast<int64_t>(model.thread_num);
  const auto mib = [](size_t b) { return FormatWholeMib(static_cast<int64_t>(b)); };
  MemoryEstimate e;
  if (o.pool) {
    e.bytes = static_cast<int64_t>(weight) + n * static_cast<int64_t>(work);
    e.source = "aclmdlQuerySize: weight " + mib(weight) + " + " + std::to_string(n) +
               " x work " + mib(work) + " (pool)";
  } else {
    e.bytes = n * static_cast<int64_t>(work + weight);
    e.source = "aclmdlQuerySize: " + std::to_string(n) + " x (work " + mib(work) + " + weight " +
               mib(weight) + ")";
  }
  return e;
}

Result<std::unique_ptr<Session>> AclBackend::LoadSession(const ModelConfig& model,
                                                         LoadProgress& /*progress*/) {
  ConfigErrors errors;
  AclOptions o = ReadOptions(model, errors);
  MMS_RETURN_IF_ERROR(errors.ToStatus());
  MMS_ASSIGN_OR_RETURN(ApiPtr api, runtime_.Api());
  // The SoC first: a model compiled for another chip must fail here, not inside the load.
  MMS_RETURN_IF_ERROR(CheckSoc(*api, model, o.soc_version));
  const std::string path = model.path.string();
  size_t work = 0, weight = 0;
  if (aclError rc = api->aclmdlQuerySize(path.c_str(), &work, &weight); rc != acl::kSuccess) {
    return api->Error("sizing '" + path + "'", "aclmdlQuerySize", rc);
  }
  MMS_ASSIGN_OR_RETURN(DeviceBinding bound, DeviceBinding::Bind(api, model.device_id, "loading " + path));
  MMS_ASSIGN_OR_RETURN(AclModelInfo info, Describe(*api, model));
  MMS_RETURN_IF_ERROR(CheckBatching(model, info));
  info.work_size = work;
  info.weight_size = weight;
  ModelSignature signature{.platform = "ascend_om"};
  for (const auto& t : info.inputs) {
    Shape shape = t.dims;
    shape[0] = -1;  // a request sends any number of rows up to the largest gear
    signature.inputs.push_back({t.name, t.type, std::move(shape), false});
  }
  for (const auto& t : info.outputs) {
    Shape shape = t.dims;
    shape[0] = -1;
    signature.outputs.push_back({t.name, t.type, std::move(shape), false});
  }
  auto session = std::make_unique<AclSession>(api, model, std::move(o), std::move(info),
                                              std::move(signature));
  MMS_RETURN_IF_ERROR(session->AllocateWeights());
  return std::unique_ptr<Session>(std::move(session));
}

}  // namespace mmserve
