// ConfigSource: where the desired served set comes from — the YAML file, the version folders
// it names, and model entries sent to the repository API — and the watch that notices when the
// files change. It reads and checks; the service applies what it read.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend_registry.h"
#include "backend/infer_request.h"
#include "common/clock.h"
#include "common/mutex.h"
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

// Watches the served files on a thread of its own and starts a reload when they change: one
// look per interval, one reload at a time. It only asks: the reload itself runs where the
// caller's `reload` sends it (the loader thread), and publishes what it read.
class ConfigWatch {
 public:
  struct Sources {
    std::function<std::string()> stamp;  // the served set's WatchStamp now
    // The interval between looks now (global.watch; a reload may change it). nullopt: not
    // watching.
    std::function<std::optional<std::chrono::milliseconds>()> interval;
    // Starts a reload and returns at once; `done` is called, on any thread, when it ended
    // (applied or rejected).
    std::function<void(std::function<void()> done)> reload;
  };
  // When it watches now, the stamp is taken now, so that a change made after start-up (before
  // the server listens) is not missed. `time` is not owned and decides when to look.
  ConfigWatch(Sources sources, const TimeSource& time);
  ~ConfigWatch();  // Stop()

  void Start();  // the watch thread
  // Stops the thread; a reload it started may still call its `done` (which then does nothing).
  void Stop();

 private:
  // How often it looks whether a reload turned the watch on, while it is off.
  static constexpr auto kOffLook = std::chrono::seconds(1);
  // What the watch thread shares with the `done` of the reload it started, which may outlive
  // the watch.
  struct Shared {
    Mutex mu;
    std::condition_variable_any ended;  // the reload ended
    bool reloading GUARDED_BY(mu) = false;
  };

  void Loop(std::stop_token stop);
  // One look at `now` with `interval`: true when the files changed and a reload is due.
  bool Due(Clock::time_point now, std::optional<std::chrono::milliseconds> interval);

  const Sources sources_;
  const TimeSource& time_;
  const std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  // The watch thread's own (the constructor's before it starts):
  std::optional<std::string> watched_;  // the stamp last seen; none while not watching
  Clock::time_point next_look_;
  std::jthread thread_;
};

}  // namespace mmserve
