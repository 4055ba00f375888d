// The validated, immutable description of a server and its models: plain structs filled by
// ParseConfig (config_parser.h). Field names follow the YAML keys users already write.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config_error.h"
#include "config/params.h"

namespace mmserve {

enum class LoadMode { kStartup, kOnDemand };

// Priority levels: 1 is the highest. `priority: high|normal|low` map onto 1, 2, 3.
inline constexpr int kMaxPriorityLevel = 9;
inline constexpr int kDefaultPriority = 2;

struct QueueConfig {
  int64_t max_size = 1024;  // queued requests per model; beyond it: 429
};

struct ModelConfig {
  std::string name;
  std::filesystem::path path;  // empty for backends that need no file (identity)
  std::string backend;         // identity | llama | acl | opencv
  std::string task;            // backend-specific; the backend's default when absent
  int64_t version = 1;
  int device_id = 0;
  int batch_size = 1;          // the batch the model was compiled for
  int max_batch = 1;           // the largest batch the server forms
  // How long a worker holding a partial batch waits for it to fill (0 = take what is queued).
  std::chrono::milliseconds max_queue_delay{0};
  bool dynamic_batch = false;
  std::string preprocess;      // e.g. resize_256_center_crop; "" = none
  std::string postprocess;     // e.g. nms_threshold_0.45; "" = none
  std::chrono::milliseconds timeout{30'000};
  int priority = kDefaultPriority;
  int thread_num = 1;          // worker threads, each with its own execution instance
  LoadMode load = LoadMode::kStartup;
  // Idle time before unloading; nullopt = never (keep_alive: -1).
  std::optional<std::chrono::milliseconds> keep_alive;
  QueueConfig queue;
  std::vector<int> cpu_affinity;  // cores for this model's workers; empty = no pinning
  Params params;
  SourceLocation where;           // the position of this model's entry in the file
};

struct GlobalConfig {
  int device = 0;                 // default device_id for models that name none
  int64_t memory_pool_mb = 0;     // per-device budget; 0 = no limit
  int thread_num = 2;             // HTTP I/O threads
  std::string host = "127.0.0.1";
  int port = 8000;
  int64_t max_request_mb = 64;    // request bodies beyond this get 413
  std::optional<std::chrono::milliseconds> keep_alive;  // default for models; nullopt = never
  std::chrono::milliseconds drain_timeout{10'000};      // graceful shutdown bound
  std::string log_level = "info";
};

struct ServerConfig {
  std::string file;
  GlobalConfig global;
  std::vector<ModelConfig> models;  // in file order, which is also the load order
};

}  // namespace mmserve
