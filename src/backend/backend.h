// Backend, Session, Instance: how an engine plugs into mmserve.
//
//   Backend   an engine family (identity, llama, acl, opencv). Validates a model's config,
//             estimates its memory before load, and loads it into a Session.
//   Session   one model version loaded on one device (weights). Owned by the service; destroyed
//             to unload, which frees its memory.
//   Instance  the execution state of one worker thread (context, stream, I/O buffers). Created by
//             Session::CreateInstance() on the worker's own thread, and touched by no other
//             thread — so engines need no locks (the llama.cpp server rule).
//
// Backends never see HTTP, JSON or YAML: they see ModelConfig, tensors and typed params.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/infer_request.h"
#include "backend/load_progress.h"
#include "common/histogram.h"
#include "common/result.h"
#include "config/config_error.h"
#include "config/model_config.h"
#include "runtime/runtime.h"

namespace mmserve {

struct TensorSpec {
  std::string name;
  DataType type = DataType::kFp32;
  Shape shape;            // -1 marks a variable dimension
  bool optional = false;  // a request may omit it (inputs only)
};

struct ModelSignature {
  std::string platform;  // "<project>_<format>", e.g. "mmserve_identity"
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

struct MemoryEstimate {
  int64_t bytes = 0;
  std::string source;  // how it was derived, for the preflight table
};

enum class ExecutionStyle {
  kBatch,       // Execute() runs N queued requests as one call
  kContinuous,  // the instance owns an iteration loop and admits sequences into slots
};

// Where an execution is, for the watchdog's report. Backends move it forward as they go.
enum class Stage : int { kQueued, kPreprocess, kExecute, kPostprocess };
std::string_view StageName(Stage stage);  // "queued", "preprocess", ...

// One execution of a batch: the requests, the batch size to run them at, and its progress.
struct Execution {
  BatchView items;
  // The batch size the engine runs: the smallest allowed tier that holds items.size() (a model
  // compiled for fixed gears pads the rest), or items.size() when the model has no tiers.
  int tier = 0;
  // Written by the worker thread, read by the watchdog thread.
  std::atomic<Stage> stage{Stage::kPreprocess};
  void set_stage(Stage s) { stage.store(s, std::memory_order_relaxed); }
};

// Where an engine can pause inside one execution so that a more important model on the same
// device gets the compute (scheduler/priority_gate.h); llama.cpp: between two layers of its
// compute graph, outside its thread pool's parallel region. MayYield() says whether a more
// important model exists at all (if not, an engine need not stop at yield points); ShouldYield()
// is cheap and says whether Yield() would wait — an engine that holds threads others could use
// parks them first. Called only on the instance's worker thread.
class YieldPoint {
 public:
  virtual ~YieldPoint() = default;
  virtual bool MayYield() const = 0;
  virtual bool ShouldYield() const = 0;
  virtual void Yield() = 0;
};

// The most batches one Instance::ExecuteEach() call takes.
inline constexpr int kMaxBatchesPerCall = 8;

// How long a worker waits without work before it parks its instance (Instance::Park).
inline constexpr std::chrono::milliseconds kParkAfter{200};

class Instance {
 public:
  virtual ~Instance() = default;
  // Set by the worker before the first execution; null when nothing ever needs to pause.
  void set_yield_point(YieldPoint* yield) { yield_ = yield; }
  YieldPoint* yield_point() const { return yield_; }
  // Runs one batch, filling each item's result. A non-OK return fails every request in the
  // batch with that status. Called only from the instance's own worker thread.
  virtual Status Execute(Execution& execution) = 0;
  // Runs several batches in one call, each with a status of its own (`statuses[i]` for
  // `batches[i]`; the scheduler gives at most batches_per_call() of them, each at most max_batch
  // requests at its own tier). For an engine behind a costly crossing (an isolated model's worker
  // process): one round trip carries what queued, and the engine still sees batches of the
  // configured size. By default one Execute() after the other.
  virtual void ExecuteEach(std::span<Execution> batches, std::span<Status> statuses) {
    for (size_t i = 0; i < batches.size(); ++i) statuses[i] = Execute(batches[i]);
  }
  // How many batches the next call may take (at most kMaxBatchesPerCall): 1 unless reaching the
  // engine costs more than the engine's own work.
  virtual int batches_per_call() const { return 1; }
  // Whether this instance splits a call in two: StartEach hands `batches` to an engine that runs
  // them elsewhere (an isolated model's worker process) and returns; FinishEach waits for their
  // results, as ExecuteEach would have. Its worker then answers the last call while the engine
  // runs the next. Nothing else runs on the instance between the two halves. By default a call
  // does not split: StartEach does nothing and FinishEach is ExecuteEach.
  virtual bool starts_calls() const { return false; }
  virtual void StartEach(std::span<Execution> batches) {}
  virtual void FinishEach(std::span<Execution> batches, std::span<Status> statuses) {
    ExecuteEach(batches, statuses);
  }
  // Asks the execution in progress to return as soon as it can (the watchdog found it hung);
  // the worker then destroys this instance and creates a fresh one. Returns false when the
  // engine cannot be interrupted. Any thread; the instance outlives the call.
  virtual bool Abort() { return false; }
  // The worker has nothing to run for a while (idle, or giving way): give back what costs other
  // models while this one waits. llama.cpp: its OpenMP compute threads — once a process holds
  // more OpenMP threads than cores, every team stops spinning at its barriers and sleeps
  // instead, which makes a busy small model several times slower next to an idle one. The next
  // execution starts them again. Called only on the worker thread.
  virtual void Park() {}
  // The worker has had nothing to run for release_after() (after Park): give back what the next
  // execution can make again, keeping the model. llama.cpp: the instance's context (its KV
  // cache, its graph's metadata), made again with the same parameters at the next execution.
  // The memory budget keeps counting what was given back: it is this model's to take again.
  // Called only on the worker thread, and only while a continuous instance is idle().
  virtual void Release() {}
  // How long a worker waits idle before Release(); nullopt: never.
  virtual std::optional<std::chrono::milliseconds> release_after() const { return std::nullopt; }

 private:
  YieldPoint* yield_ = nullptr;
};

// The instance of a kContinuous session: it owns an iteration loop over sequences in slots.
// The worker admits requests into free slots between steps; each Step() runs one decode over
// every active sequence and completes (or streams) requests as they finish. Called only from
// the instance's own worker thread.
// How much longer a worker that parked `instance` (after kParkAfter idle) waits before it
// releases it: release_after() counts from the last execution. nullopt: never.
inline std::optional<std::chrono::milliseconds> ReleaseAfterPark(const Instance& instance) {
  const auto after = instance.release_after();
  if (!after) return std::nullopt;
  return std::max(*after - kParkAfter, std::chrono::milliseconds(0));
}

class ContinuousInstance : public Instance {
 public:
  Status Execute(Execution&) final {
    return Internal("a continuous instance does not execute batches");
  }
  virtual int free_slots() const = 0;
  // Takes ownership; the request is completed through its `done` when it finishes or fails.
  virtual void Admit(std::unique_ptr<InferRequest> request) = 0;
  virtual bool idle() const = 0;
  virtual void Step() = 0;
  // Completes every active request with `status` (shutdown).
  virtual void CancelAll(const Status& status) = 0;
};

class Session {
 public:
  virtual ~Session() = default;
  virtual const ModelSignature& signature() const = 0;
  // Bytes this session holds now (measured, not estimated), with room reserved for what it
  // keeps only to be faster (a prompt cache's limit).
  virtual int64_t resident_bytes() const = 0;
  // Gives back up to `bytes` of that reserved room (dropping what it held), so that another
  // model fits without an eviction; returns how much resident_bytes() fell. The room stays
  // given back until the model loads again. Any thread.
  virtual int64_t ShedCache(int64_t bytes) {
    (void)bytes;
    return 0;
  }
  virtual ExecutionStyle style() const { return ExecutionStyle::kBatch; }
  // Called on worker `index`'s thread before it serves; the instance stays on that thread.
  virtual Result<std::unique_ptr<Instance>> CreateInstance(int index) = 0;
  // Asks executions in progress to return early (shutdown of a hung model). Any thread.
  virtual void Interrupt() {}
  // The batch sizes the model was compiled for (Ascend dynamic-batch gears), ascending; empty
  // when any size up to max_batch runs as is. Any thread.
  virtual std::vector<int> batch_tiers() const { return {}; }
  // Engine counters for stats and tests (e.g. decodes, sequences): counts since the session
  // was made, except the gauges IsGaugeCounter() names (a value now). Any thread.
  virtual std::map<std::string, int64_t> counters() const { return {}; }
  // What the session says of itself in words, for stats (an isolated model's last worker exit).
  // Any thread.
  virtual std::map<std::string, std::string> notes() const { return {}; }
  // The model's tokenizer (llama: its vocabulary), for /tokenize and /detokenize. Tokenize
  // gives each token's id and, with `pieces`, its text; Detokenize refuses an id outside the
  // vocabulary. Unimplemented for a model without one. Any thread.
  struct Token {
    int32_t id = 0;
    std::string piece;
  };
  virtual Result<std::vector<Token>> Tokenize(std::string_view text, bool add_special,
                                              bool pieces) const {
    (void)text, (void)add_special, (void)pieces;
    return Unimplemented("this model has no tokenizer");
  }
  virtual Result<std::string> Detokenize(std::span<const int32_t> tokens) const {
    (void)tokens;
    return Unimplemented("this model has no tokenizer");
  }
  // Tokens of context per sequence (llama), 0 where that does not apply. Any thread.
  virtual int64_t context_length() const { return 0; }
  // Engine latency distributions by name (generation: time_to_first_token,
  // time_per_output_token). Any thread.
  virtual std::map<std::string, Histogram> histograms() const { return {}; }
  // True when one instance may run Execute() on several threads at once and an execution never
  // blocks (no device wait, no sleep): the scheduler may then run requests on the threads that
  // submit them (`execution: inline`). Any thread.
  virtual bool executes_inline() const { return false; }
  // True when the instances' executions queue on one device that runs one at a time (an NPU's
  // AI cores): launching a second, partial batch while another instance's batch is on the
  // device gains nothing but pays the launch cost again, so the batcher holds it until the batch
  // fills or the device frees. False where instances compute side by side. Any thread.
  virtual bool executions_share_device() const { return false; }
  // Warm-up (the template's 预热): a request of `rows` rows that exercises a real execution —
  // by default zeros (or the text "warmup") for every required input of the signature; null
  // when the model cannot be warmed that way. And the executions per batch tier when the config
  // says nothing (`warmup:`). Any thread.
  virtual std::unique_ptr<InferRequest> WarmupRequest(int rows) const;
  virtual int default_warmup() const { return 0; }
  // Why a loaded session can no longer serve — an isolated model whose worker exited too often
  // to be restarted again —, else OK. The model then shows FAILED with this reason (until it
  // is loaded again). Any thread.
  virtual Status health() const { return Status::Ok(); }
};

// Whether Session::counters() key `key` is a gauge (a value now: bytes held, a pid, a time)
// rather than a count since the session was made. A model version's counts are carried across
// its loads; its gauges are not.
bool IsGaugeCounter(std::string_view key);
// Adds one session's counts to a sum of others': each counter but the gauges, each histogram.
void AddSessionCounts(std::map<std::string, int64_t>& into_counters,
                      std::map<std::string, Histogram>& into_histograms,
                      const std::map<std::string, int64_t>& counters,
                      const std::map<std::string, Histogram>& histograms);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::vector<std::string> tasks() const = 0;  // the first is the default
  virtual bool needs_path() const { return true; }
  // Whether its sessions take tensors, which `preprocess:` / `postprocess:` can wrap
  // (backend/vision/); false for engines of text.
  virtual bool takes_tensors() const { return true; }
  // The runtime every session of this backend runs on. Not owned; outlives the backend.
  virtual Runtime& runtime() = 0;

  // Adds every problem with `model` (its params above all) to `errors`. Loads nothing.
  // Checks `model` and completes what its file tells: llama reads the GGUF header once, for its
  // errors and, when the entry names no task (!model.task_set), the task the file is made for.
  virtual void Validate(ModelConfig& model, ConfigErrors& errors) const = 0;
  // Memory the model will hold once loaded, before loading it.
  virtual Result<MemoryEstimate> Estimate(const ModelConfig& model) const = 0;
  // REQUIRES: Validate() reported nothing, and the caller holds a lease on runtime().
  // `progress`, when given, hears how far the load has read the model's file (its total is the
  // file's size); it is finished when Load() returns.
  Result<std::unique_ptr<Session>> Load(const ModelConfig& model,
                                        LoadProgress* progress = nullptr);
  // Whether the sessions Load() makes of `model` will be Session::executes_inline().
  virtual bool ExecutesInline(const ModelConfig& model) const { return false; }
  // Whether `mmserve worker` can serve `model` in a process of its own (`isolation: process`,
  // backend/process/): batch-style sessions whose results travel as tensors and parameters.
  virtual bool RunsIsolated(const ModelConfig& model) const { return false; }
  // Whether the engine behind `model` runs OpenMP compute threads (BackendCatalog::RunsOpenMp).
  virtual bool RunsOpenMp(const ModelConfig& model) const { return false; }
  // In the probe child (`mmserve probe`, file_probe.h): runs the third-party parser this backend
  // feeds its model files to over the file at `fd`, and returns what the server needs of it as
  // text (opencv: the bytes one Net holds at `arg` rows). The caller holds a lease on runtime().
  // Unimplemented where no third-party parser reads the backend's files in the server.
  virtual Result<std::string> ProbeFile(int fd, int64_t arg) const {
    return Unimplemented(name() + " runs no file probe");
  }

 private:
  // Load() itself; a backend that reads its file piece by piece reports to `progress`.
  virtual Result<std::unique_ptr<Session>> LoadSession(const ModelConfig& model,
                                                       LoadProgress& progress) = 0;
};

}  // namespace mmserve
