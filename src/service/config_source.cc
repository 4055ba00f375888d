#include "service/config_source.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "common/json.h"
#include "common/strings.h"
#include "config/config_readers.h"
#include "config/config_parser.h"

namespace mmserve {

namespace fs = std::filesystem;

Result<ServerConfig> ReadConfigFile(const std::string& file, const BackendRegistry& backends,
                                    const std::string& model_name) {
  if (file.empty()) {
    return FailedPrecondition("nothing to reload: the models were named on the command line "
                              "(--model), not in a file");
  }
  auto next = LoadConfigFile(file, backends, model_name);
  if (!next.ok()) return InvalidArgument(file + ": " + std::string(next.status().message()));
  return next;
}

Result<std::vector<ModelConfig>> ReadModelEntry(const std::string& name, nlohmann::json entry,
                                                const ServerConfig& current,
                                                const BackendRegistry& backends) {
  if (!entry.is_object()) {
    return InvalidArgument("parameters.config: expected a model entry (a JSON object), found " +
                           QuoteJson(entry));
  }
  if (!entry.contains("name")) entry["name"] = name;
  if (entry["name"] != name) {
    return InvalidArgument("parameters.config.name: expected '" + name +
                           "' (the model named in the URL), found " + QuoteJson(entry["name"]));
  }
  auto configs = ParseModelEntry(entry, current, backends);
  if (!configs.ok()) return configs.status();
  const auto& roots = current.global.model_roots;
  for (const auto& m : *configs) {
    if (m.path.empty()) continue;
    if (!InsideRoots(roots, m.path)) {
      std::error_code ec;
      const fs::path real = fs::weakly_canonical(m.path, ec);
      std::vector<std::string> names;
      for (const auto& root : roots) names.push_back(root.string());
      return InvalidArgument("parameters.config.path: expected a file inside the model roots (" +
                             Join(names, ", ") + "; global.model_roots), found \"" +
                             real.string() + "\"");
    }
  }
  return configs;
}

std::string WatchStamp(const ServerConfig& served) {
  std::string stamp;
  std::error_code ec;
  // The file a symlink leads to is part of the stamp: a Kubernetes ConfigMap volume updates a
  // file by switching a `..data` symlink to a new folder, whatever the times and sizes say.
  auto add_file = [&](const fs::path& file) {
    std::error_code size_ec, time_ec, target_ec;
    const auto size = fs::file_size(file, size_ec);
    const auto mtime = fs::last_write_time(file, time_ec).time_since_epoch().count();
    const fs::path target = fs::canonical(file, target_ec);
    stamp += file.string() + ">" + target.string() + ":" +
             std::to_string(size_ec ? -1 : static_cast<int64_t>(size)) + ":" +
             std::to_string(time_ec ? -1 : mtime) + ";";
  };
  std::set<fs::path> folders;
  add_file(served.file);
  if (fs::is_directory(served.file, ec)) folders.insert(served.file);  // a model directory
  for (const auto& m : served.models) {
    if (!m.versions_dir.empty()) folders.insert(m.versions_dir);
    if (!m.path.empty()) add_file(m.path);
  }
  for (const auto& dir : folders) {
    std::vector<std::string> names;
    for (const auto& d : fs::directory_iterator(dir, ec)) names.push_back(d.path().filename());
    std::sort(names.begin(), names.end());
    stamp += dir.string() + "[" + Join(names, ",") + "];";
  }
  return stamp;
}

ConfigWatch::ConfigWatch(Sources sources, const TimeSource& time)
    : sources_(std::move(sources)), time_(time), next_look_(time.Now()) {
  if (const auto interval = sources_.interval()) {
    watched_ = sources_.stamp();
    next_look_ = time_.Now() + *interval;
  }
}

ConfigWatch::~ConfigWatch() { Stop(); }

void ConfigWatch::Start() {
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

void ConfigWatch::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

bool ConfigWatch::Due(Clock::time_point now, std::optional<std::chrono::milliseconds> interval) {
  if (!interval) {
    watched_.reset();
    next_look_ = now + kOffLook;
    return false;
  }
  if (!watched_) {  // a reload turned the watch on: from now on
    watched_ = sources_.stamp();
    next_look_ = now + *interval;
    return false;
  }
  if (now < next_look_) return false;
  next_look_ = now + *interval;
  std::string stamp = sources_.stamp();
  if (stamp == *watched_) return false;
  watched_ = std::move(stamp);
  return true;
}

void ConfigWatch::Loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    if (Due(time_.Now(), sources_.interval())) {
      {
        MutexLock lock(shared_->mu);
        shared_->reloading = true;
      }
      sources_.reload([shared = shared_] {
        MutexLock lock(shared->mu);
        shared->reloading = false;
        shared->ended.notify_all();
      });
      // One reload at a time; once it ended, what is watched is taken anew (the served
      // files may have changed with it).
      {
        MutexLock lock(shared_->mu);
        WaitUntil(time_, shared_->ended, lock, stop, Clock::time_point::max(),
                  [&]() REQUIRES(shared_->mu) { return !shared_->reloading; });
      }
      if (stop.stop_requested()) return;
      if (watched_) watched_ = sources_.stamp();
      continue;
    }
    MutexLock lock(shared_->mu);
    WaitUntil(time_, shared_->ended, lock, stop, next_look_, [] { return false; });
  }
}

}  // namespace mmserve
