// The identity backend: echoes each input tensor back as an output, for tests, demos and load
// tests. It behaves like a real engine where that matters to the layers above:
//
//   params:
//     tensors:                 # default: [{input: INPUT0, output: OUTPUT0, datatype: FP32, shape: [-1]}]
//       - {input: INPUT0, output: OUTPUT0, datatype: FP32, shape: [-1, 4], optional: false}
//     latency_ms: 0            # per Execute() call
//     latency_per_item_us: 0   # per request in the batch
//     memory_mb: 0             # really allocated and touched at load; resident_bytes() reports it
//     load_ms: 0               # time Load() takes
//     fail_every_n: 0          # every Nth Execute() call fails the whole batch (0 = never)
//     fail_code: Internal      # the StatusCode of injected failures
//     fail_message: "injected failure"
//     hang_on: ""              # a BYTES element equal to this hangs the execution ...
//     hang_ms: 60000           # ... for this long, or until interrupted or aborted ...
//     hang_stage: execute      # ... in this stage: preprocess | execute | postprocess
//     crash_on: ""             # a BYTES element equal to this kills the process ...
//     crash_after: 0           # ... as does the Nth Execute() call (0 = never) ...
//     crash_signal: segv       # ... with this signal: segv | abort (for isolation: process)
//
//   counters: executions, items, padded_items (rows a fixed-gear engine would pad to the tier)
#pragma once

#include "backend/backend.h"

namespace mmserve {

class IdentityBackend final : public Backend {
 public:
  // `runtime` is not owned and outlives the backend.
  explicit IdentityBackend(Runtime& runtime) : runtime_(runtime) {}

  std::string name() const override { return "identity"; }
  std::vector<std::string> tasks() const override { return {"identity"}; }
  bool needs_path() const override { return false; }
  Runtime& runtime() override { return runtime_; }

  void Validate(ModelConfig& model, ConfigErrors& errors) const override;
  Result<MemoryEstimate> Estimate(const ModelConfig& model) const override;
  // Unless latency or a hang is injected: then an execution blocks.
  bool ExecutesInline(const ModelConfig& model) const override;
  bool RunsIsolated(const ModelConfig&) const override { return true; }

 private:
  Result<std::unique_ptr<Session>> LoadSession(const ModelConfig& model,
                                               LoadProgress& progress) override;
  Runtime& runtime_;
};

}  // namespace mmserve
