// The validated, immutable description of a server and its models: plain structs filled by
// ParseConfig (config_parser.h). Field names follow the YAML keys users already write.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config_error.h"
#include "config/params.h"
#include "config/vision_config.h"

namespace mmserve {

enum class LoadMode { kStartup, kOnDemand };

// Where a model's engine runs: in the server's process, or in a worker process of its own
// (`isolation: process`, backend/process/): a crash there takes down that model only; or in a
// worker that, once loaded, runs sandboxed (`isolation: sandbox`, backend/process/sandbox.h):
// no new privileges, a seccomp allow list, and an unprivileged user when started as root.
enum class Isolation { kNone, kProcess, kSandbox };
// Whether the model runs in a worker process (process or sandbox).
inline bool InWorker(Isolation i) { return i != Isolation::kNone; }

// How a worker process's OpenMP compute threads wait for the next execution (`compute_wait`):
// spin briefly first (libgomp's default, a few milliseconds), so that a busy model's next batch
// finds them awake; or sleep at once, so that an idle model's threads leave the cores to the
// server and the other workers (OMP_WAIT_POLICY=passive). In-process models share the server's
// OpenMP runtime, which its environment sets.
enum class ComputeWait { kSpin, kSleep };

// Priority levels: 1 is the highest. `priority: high|normal|low` map onto 1, 2, 3.
inline constexpr int kMaxPriorityLevel = 9;
inline constexpr int kDefaultPriority = 2;

// The queue policy of one priority level (Triton's ModelQueuePolicy).
struct LevelPolicy {
  int64_t max_size = 1024;  // queued requests of this level; beyond it: 429
  std::chrono::milliseconds timeout{30'000};  // default request timeout at this level
};

struct QueueConfig {
  int64_t max_size = 1024;  // per level, unless the level says otherwise
  // Levels with their own policy; the others use max_size and the model's timeout_ms.
  std::map<int, LevelPolicy> levels;
};

// Consecutive failures, or consecutive timeouts, that take a model out of service, and for how
// long. A success resets both counts; 0 = that count never opens the breaker.
struct BreakerConfig {
  int failures = 5;  // executions the backend failed (5xx), device errors
  int timeouts = 5;  // executions that ran past their request's deadline (504)
  std::chrono::milliseconds cooldown{10'000};
};

// `canary: {version, weight}`: that share of a model's unversioned requests goes to `version`.
struct CanaryConfig {
  int64_t version = 0;
  double weight = 0;  // 0..1
};

// One served version of one model. A model with several versions (a folder of numeric version
// folders, or a `versions:` list) is one ModelConfig per version, sharing name and routing.
struct ModelConfig {
  std::string name;
  std::filesystem::path path;  // empty for backends that need no file (identity)
  // The folder of numeric version folders this version was found in; empty otherwise.
  std::filesystem::path versions_dir;
  std::string backend;         // identity | llama | acl | opencv
  std::string task;            // backend-specific; the file's, else the backend's default when absent
  bool task_set = false;       // named in the file
  int64_t version = 1;
  // Routing, the same in every version of a name: labels (e.g. stable, canary) → versions, and
  // the canary share. A request without version or label goes to the canary with its weight,
  // else to the version labelled `stable`, else to the highest version.
  std::map<std::string, int64_t> labels;
  std::optional<CanaryConfig> canary;
  // Everything that shapes this version's load (its fields, effective params, file path, size
  // and modification time), routing excluded: a reload reloads a version whose fingerprint changed.
  std::string fingerprint;
  int device_id = 0;
  int batch_size = 1;          // the batch the model was compiled for
  bool batch_size_set = false;  // named in the file
  int max_batch = 1;           // the largest batch the server forms
  bool max_batch_set = false;  // named in the file; otherwise a model's own gears set it
  // How long a worker holding a partial batch waits for it to fill (0 = take what is queued).
  std::chrono::milliseconds max_queue_delay{0};
  // true: the model batches dynamically (an acl OM must have gears); false: no batch beyond
  // batch_size; nullopt: whatever the model supports.
  std::optional<bool> dynamic_batch;
  // Allowed batch sizes, ascending (Ascend ATC gears): a formed batch runs at the smallest tier
  // that holds it. Empty: any size up to max_batch (or the model's own gears, when it has them).
  std::vector<int> batch_tiers;
  bool preserve_ordering = false;  // responses leave in arrival order (multi-worker models)
  // The image stages around the network (config/vision_config.h); nullopt = none.
  std::optional<PreprocessConfig> preprocess;    // e.g. resize_256_center_crop
  std::optional<PostprocessConfig> postprocess;  // e.g. nms_threshold_0.45
  std::chrono::milliseconds timeout{30'000};
  int priority = kDefaultPriority;
  int thread_num = 1;          // worker threads, each with its own execution instance
  LoadMode load = LoadMode::kStartup;
  bool pinned = false;  // never evicted to make room for another model
  // Idle time before unloading; nullopt = never (keep_alive: -1).
  std::optional<std::chrono::milliseconds> keep_alive;
  QueueConfig queue;
  BreakerConfig breaker;
  // An execution still running this long after its deadline is reported as hung.
  std::chrono::milliseconds watchdog_margin{1'000};
  std::vector<int> cpu_affinity;  // cores for this model's workers; empty = no pinning
  int nice = 0;                   // nice value of this model's workers (and engine threads)
  // `execution: inline`: each request runs on the server thread that received it, with no
  // worker or queue (only backends whose executions never block; scheduler/model_scheduler.h).
  bool execute_inline = false;
  Isolation isolation = Isolation::kNone;
  // A worker's compute threads between executions; nullopt = the server's OMP_WAIT_POLICY when
  // its environment sets one, else sleep.
  std::optional<ComputeWait> compute_wait;
  // Executions per batch tier each worker runs on its fresh instance before the model turns
  // READY (part of the load time); nullopt = the backend's default (acl 1, others 0).
  std::optional<int> warmup;
  Params params;
  SourceLocation where;           // the position of this model's entry in the file
  std::string entry;              // its path in the file, "models[3]"; fields are named under it
  std::string Field(const std::string& key) const { return entry.empty() ? key : entry + "." + key; }
};

// Asynchronous inference jobs: how many may be pending or unfetched, and how long a finished
// job's result is kept.
struct JobsConfig {
  int64_t max = 1000;
  std::chrono::milliseconds ttl{600'000};
  bool operator==(const JobsConfig&) const = default;
};

// The one memory rule (the template's): models may fill max_fill of a device's capacity
// (global.memory_pool when set, else what the device reports); before anything loads,
// Σ(start-up estimates) × factor must fit in that, and in the memory free at start.
struct PreflightConfig {
  double factor = 1.2;
  double max_fill = 0.9;
  bool operator==(const PreflightConfig&) const = default;
};

struct GlobalConfig {
  int device = 0;                 // default device_id for models that name none
  int64_t memory_pool_mb = 0;     // per-device capacity for models; 0 = what the device reports
  PreflightConfig preflight;
  int thread_num = 2;             // HTTP I/O threads
  std::string host = "127.0.0.1";
  int port = 8000;
  int64_t max_request_mb = 64;    // request bodies beyond this get 413
  std::optional<std::chrono::milliseconds> keep_alive;  // default for models; nullopt = never
  Isolation isolation = Isolation::kNone;               // default for models
  std::chrono::milliseconds drain_timeout{10'000};      // graceful shutdown bound
  std::string log_level = "info";
  JobsConfig jobs;
  // Folders whose files a repository load request (POST /v2/repository/models/{m}/load with a
  // config) may name; empty = the config file's folder.
  std::vector<std::filesystem::path> model_roots;
  // How often the YAML file and the version folders it names are checked for changes, which
  // then reload; nullopt = never (SIGHUP and POST /v2/repository/reload still reload).
  std::optional<std::chrono::milliseconds> watch;
  // The KServe v2 gRPC port on `host`; nullopt = no gRPC (0 = an ephemeral port).
  std::optional<int> grpc_port;
  // Bearer keys: `api_key` for inference and reads, `admin_key` for load/unload/reload (the
  // api_key when unset). Empty = no check. MMSERVE_API_KEY / MMSERVE_ADMIN_KEY override them.
  std::string api_key;
  std::string admin_key;
  int max_connections = 1024;  // beyond: 503 with Retry-After
  int64_t max_in_flight = 0;   // requests being handled at once; beyond: 503; 0 = no limit
  std::vector<std::string> cors_origins;  // allowed browser origins ("*": any); empty = no CORS
  // Host header values served besides IP addresses, localhost and the machine's name: a name,
  // ".suffix" (the domain and every name under it) or "*" (any: no DNS-rebinding check).
  std::vector<std::string> allowed_hosts;
  // How long after a model's last answer the models of less important priority on its device
  // still give way to it (scheduler/priority_gate.h).
  std::chrono::milliseconds priority_linger{5};
};

struct ServerConfig {
  std::string file;        // the YAML file, or a model directory (config/model_dir.h)
  std::string model_name;  // a model directory's one model's name (--model-name); else empty
  GlobalConfig global;
  std::vector<ModelConfig> models;  // in file order, which is also the load order
  // What the command line and the environment set over the file's global section (--port,
  // MMSERVE_API_KEY, ...): applied again to every re-read of the file, so that a reload
  // neither undoes them nor reports them as needing a restart. Empty: nothing overridden.
  std::function<void(GlobalConfig&)> overrides;
};

}  // namespace mmserve
