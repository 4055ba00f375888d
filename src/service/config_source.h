// ConfigSource: where the desired served set comes from — the YAML file, the version folders
// it names, and model entries sent to the repository API — and the watch that notices when the
// files change. It reads and checks; the service applies what it read.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend_registry.h"
#include "backend/infer_request.h"
#include "config/model_config.h"

namespace mmserve {

// The YAML file (or model directory, `model_name` naming its one model) read anew, its version
// folders scanned; errors are prefixed by the file.
Result<ServerConfig> ReadConfigFile(const std::string& file, const BackendRegistry& backends,
                                    const std::string& model_name = "");

// A model entry (as under `models:`, as JSON) the repository API sent for model `name`: read
// as if it were in `current`'s YAML file, its files inside global.model_roots.
Result<std::vector<ModelConfig>> ReadModelEntry(const std::string& name, nlohmann::json entry,
                                                const ServerConfig& current,
                                                const BackendRegistry& backends);

// What the watched files look like: the YAML file's and each model file's size and time, and
// each version folder's listing. Equal stamps: nothing changed.
std::string WatchStamp(const ServerConfig& served);

// Decides when the watched files changed: one look per interval, one reload at a time.
// Not thread-safe, except Reloaded(): one thread looks (the lifecycle's reaper).
class ConfigWatch {
 public:
  // `stamp`: the served set's stamp now. With `watching` it is taken now, so that a change made
  // after start-up (before the server listens) is not missed.
  ConfigWatch(std::function<std::string()> stamp, bool watching);

  // A look at `now` with the interval `watch` (nullopt: not watching). True: the files changed
  // and a reload is due; the caller reloads and calls Reloaded() when it is done.
  bool Due(Clock::time_point now, std::optional<std::chrono::milliseconds> watch);
  void Reloaded() { reload_pending_.store(false); }  // any thread

 private:
  std::function<std::string()> stamp_;
  std::optional<std::string> watched_;  // the stamp last seen
  Clock::time_point next_look_;
  bool reloading_ = false;  // a reload Due asked for is not done yet
  std::atomic<bool> reload_pending_{false};
};

}  // namespace mmserve
