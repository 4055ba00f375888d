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

ConfigWatch::ConfigWatch(std::function<std::string()> stamp, bool watching)
    : stamp_(std::move(stamp)), next_look_(Clock::now()) {
  if (watching) watched_ = stamp_();
}

bool ConfigWatch::Due(Clock::time_point now, std::optional<std::chrono::milliseconds> watch) {
  // Once a reload is done, what is watched is taken anew (the served files may have changed).
  if (reloading_ && !reload_pending_.load()) {
    reloading_ = false;
    watched_ = stamp_();
  }
  if (!watch) {
    watched_.reset();
    return false;
  }
  if (!watched_) {  // a reload configured the watch: from now on
    watched_ = stamp_();
    next_look_ = now + *watch;
    return false;
  }
  if (now < next_look_ || reloading_) return false;
  next_look_ = now + *watch;
  std::string stamp = stamp_();
  if (stamp == *watched_) return false;
  watched_ = std::move(stamp);
  reloading_ = true;
  reload_pending_.store(true);
  return true;
}

}  // namespace mmserve
