// The AscendCL backend (`acl`): offline OM models on Huawei Ascend cards through libascendcl,
// resolved with dlopen by AclRuntime (mmserve builds and runs without CANN; a model then fails
// to load with "AscendCL not found", alone).
//
//   params:
//     memory: independent     # independent: ACL allocates each load's work and weight memory;
//                             # pool: mmserve allocates them (aclmdlLoadFromFileWithMem) — the
//                             # weights once per model version, shared by its instances
//     soc_version: ""         # the SoC the OM was compiled for (ATC --soc_version); else the
//                             # sidecar file <model>.soc_version, if any; checked against
//                             # aclrtGetSocName() before anything loads
//     sync_timeout_ms: 10000  # how long past a batch's latest deadline the worker still waits
//                             # for the stream before failing it (the watchdog usually acts first)
//
// Lifecycle (shared/reference/ascendcl.md §2.5). Load, on the loader thread: the SoC check, the
// model description (aclmdlGetDescFromFile, or a load in a scratch context where that is not
// supported), pool memory. Each worker thread then creates its own instance: aclrtSetDevice,
// its own context and stream, its own load of the model (a model id runs one execution at a
// time), the description, and every input/output buffer — device and pinned host — sized once
// from aclmdlGet{Input,Output}SizeByIndex and reused by every request. Teardown, on the same
// thread, in the documented order: buffers and datasets, description, unload (then pool work
// memory), stream, context, device reset; the runtime's aclFinalize is RuntimeGuard's.
//
// Tensors: the first dimension of every input and output is the batch. Dynamic-batch gears
// (aclmdlGetDynamicBatch) are the session's batch_tiers(); a static model's tier is its compiled
// batch. A request sends rows [n, ...] of each input; a batch's rows run at the smallest gear
// that holds them (the rest padded with zeros, aclmdlSetDynamicBatchSize before each
// execution), and each request gets its own rows of every output back.
//
// Execution: aclmdlExecuteAsync, then aclrtSynchronizeStreamWithTimeout in short slices until
// the stream completes, the watchdog aborts the instance (a hung stream: 504, the instance is
// rebuilt), or sync_timeout_ms passes the batch's latest deadline.
//
//   counters: executions, rows, padded_rows, gear_<n> (executions at gear n), device_bytes
#pragma once

#include "backend/backend.h"
#include "runtime/acl_runtime.h"

namespace mmserve {

class AclBackend final : public Backend {
 public:
  // `runtime` is not owned and outlives the backend.
  explicit AclBackend(AclRuntime& runtime) : runtime_(runtime) {}

  std::string name() const override { return "acl"; }
  std::vector<std::string> tasks() const override { return {"infer"}; }
  Runtime& runtime() override { return runtime_; }
  bool RunsIsolated(const ModelConfig&) const override { return true; }

  void Validate(ModelConfig& model, ConfigErrors& errors) const override;
  // aclmdlQuerySize's work and weight sizes, once per instance (weights once in pool mode).
  Result<MemoryEstimate> Estimate(const ModelConfig& model) const override;

 private:
  Result<std::unique_ptr<Session>> LoadSession(const ModelConfig& model,
                                               LoadProgress& progress) override;
  AclRuntime& runtime_;
};

}  // namespace mmserve
