#include "config/config_parser.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/json.h"
#include "common/strings.h"
#include "config/config_readers.h"
#include "config/model_dir.h"
#include "config/yaml_tree.h"

namespace mmserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- the parser ------------------------------------------------------------------------------

class Parser {
 public:
  // `generated`: the YAML stands for a model directory or model files (config/model_dir.h);
  // nobody wrote it, so errors name `file` without a line and column in it.
  Parser(const std::string& file, const BackendCatalog& catalog, bool generated = false)
      : file_(file),
        catalog_(catalog),
        base_dir_(fs::path(file).parent_path()),
        generated_(generated) {}

  Result<ServerConfig> Run(const std::string& yaml) {
    auto locations = std::make_shared<Params::Locations>();
    std::optional<json> tree = ReadYamlTree(yaml, file_, *locations, errors_);
    if (!tree) return errors_.ToStatus();
    if (generated_) {
      for (auto& [path, where] : *locations) where.line = where.column = 0;
    }
    ServerConfig config;
    config.file = file_;
    const Params root(*tree, "", locations);
    if (!tree->is_object()) {
      errors_.Add({.where = root.LocationOf(""),
                   .field = "(document)",
                   .expected = "a map with 'global' and 'models'",
                   .found = DescribeFound(*tree)});
      return errors_.ToStatus();
    }
    ParamReader top(root, errors_);
    if (auto global = top.Map("global")) config.global = ReadGlobal(*global, base_dir_, errors_);
    if (!top.Has("models")) {
      top.Error("models", "a list of models", "nothing");
    }
    for (const Params& m : top.MapList("models")) {
      for (auto& version : ReadModel(m, config.global)) config.models.push_back(std::move(version));
    }
    top.Finish();
    if (config.global.model_roots.empty()) {
      std::error_code ec;
      config.global.model_roots.push_back(
          fs::weakly_canonical(base_dir_.empty() ? fs::current_path(ec) : base_dir_, ec));
    }
    if (top.Has("models") && (*tree)["models"].is_array() && (*tree)["models"].empty()) {
      top.Error("models", "at least one model", "an empty list");
    }
    MMS_RETURN_IF_ERROR(errors_.ToStatus());
    return config;
  }

  Result<std::vector<ModelConfig>> RunEntry(const json& entry, const GlobalConfig& global) {
    roots_ = &global.model_roots;  // a client's entry: no file outside them is even looked at
    const Params p(entry, "parameters.config", std::make_shared<Params::Locations>());
    if (!entry.is_object()) {
      errors_.Add({.where = {.file = file_},
                   .field = "config",
                   .expected = "a model entry (a map, as under models: in the YAML)",
                   .found = DescribeFound(entry)});
      return errors_.ToStatus();
    }
    auto versions = ReadModel(p, global);
    MMS_RETURN_IF_ERROR(errors_.ToStatus());
    return versions;
  }

 private:
  fs::path Absolute(const std::string& text) const { return AbsoluteIn(base_dir_, text); }

  // One ModelConfig per served version of the entry `p`.
  std::vector<ModelConfig> ReadModel(const Params& p, const GlobalConfig& global) {
    ParamReader r(p, errors_);
    ModelConfig m;
    m.where = p.LocationOf(p.path());
    m.entry = p.path();
    m.name = r.String("name", "");
    if (!r.Has("name")) {
      r.Error("name", "a model name", "nothing");
    } else if (!m.name.empty() && !IsValidName(m.name)) {
      r.Error("name", "letters, digits, '_', '-' or '.' (not \".\" or \"..\")",
              "\"" + Abbreviate(m.name) + "\"");
    } else if (auto [it, inserted] = names_.emplace(m.name, m.where); !inserted) {
      r.Error("name", "a unique model name (first defined at " + it->second.ToString() + ")",
              "\"" + m.name + "\" again");
    }
    const std::string path_text = r.String("path", "");
    m.backend = r.String("backend", "");
    if (!path_text.empty()) m.path = Absolute(path_text);
    const std::string model_file = r.String("model_file", "");
    std::vector<VersionSource> versions = ReadVersions(p, r, m, path_text, model_file);
    // The backend follows the (first) version's file.
    ResolveBackend(r, m, versions.empty() ? path_text : versions.front().path_text);
    m.task = r.String("task", "");
    m.task_set = r.Has("task");
    m.device_id = static_cast<int>(r.Int("device_id", global.device, 0, 1023));
    ReadBatching(r, m);
    m.preprocess = ReadPreprocess(r);
    m.postprocess = ReadPostprocess(r, base_dir_);
    CheckStages(r, m.preprocess, m.postprocess);
    m.timeout = std::chrono::milliseconds(r.Int("timeout_ms", m.timeout.count(), 1, kMaxTimeoutMs));
    m.priority = ReadPriority(r);
    m.thread_num = static_cast<int>(r.Int("thread_num", m.thread_num, 1, 256));
    m.load = r.String("load", "startup", {"startup", "on_demand"}) == "on_demand"
                 ? LoadMode::kOnDemand
                 : LoadMode::kStartup;
    m.keep_alive = ReadDuration(r, "keep_alive", global.keep_alive);
    m.pinned = r.Bool("pinned", m.pinned);
    if (auto queue = r.Map("queue")) ReadQueue(*queue, m);
    if (auto breaker = r.Map("breaker")) {
      ParamReader b(*breaker, errors_);
      m.breaker.failures = static_cast<int>(b.Int("failures", m.breaker.failures, 0, 1'000'000));
      m.breaker.timeouts = static_cast<int>(b.Int("timeouts", m.breaker.timeouts, 0, 1'000'000));
      m.breaker.cooldown = std::chrono::milliseconds(
          b.Int("cooldown_ms", m.breaker.cooldown.count(), 1, kMaxTimeoutMs));
      b.Finish();
    }
    m.watchdog_margin = std::chrono::milliseconds(
        r.Int("watchdog_margin_ms", m.watchdog_margin.count(), 1, kMaxTimeoutMs));
    const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
    for (int64_t core : r.IntList("cpu_affinity", 0, cores - 1)) {
      m.cpu_affinity.push_back(static_cast<int>(core));
    }
    m.nice = static_cast<int>(r.Int("nice", m.nice, 0, 19));
    if (r.Has("warmup")) m.warmup = static_cast<int>(r.Int("warmup", 0, 0, 100));
    m.execute_inline = r.String("execution", "worker", {"worker", "inline"}) == "inline";
    if (m.execute_inline) CheckInlineRules(r, m);
    m.isolation = ReadIsolation(r, global.isolation);
    m.compute_wait = ReadComputeWait(r);
    if (auto params = r.Map("params")) m.params = *params;
    ReadRouting(r, m, versions);
    r.Finish();
    CheckModelRules(r, m);
    std::vector<ModelConfig> out;
    for (const VersionSource& source : versions) {
      out.push_back(ReadVersion(p, r, m, source));
    }
    return out;
  }

  struct VersionSource;
  // One version of the entry `m`: its file checked (then read by the backend: its header, and
  // the task it is made for when the entry names none), its own params merged.
  ModelConfig ReadVersion(const Params& p, ParamReader& r, const ModelConfig& m,
                          const VersionSource& source) {
    ModelConfig v = m;
    v.version = source.version;
    v.path = source.path;
    if (source.in_folder) v.versions_dir = m.path;
    if (source.params) {
      nlohmann::json merged = m.params.value();
      for (const auto& [key, value] : source.params->value().items()) merged[key] = value;
      v.params = source.params->Sub(std::move(merged), source.params->path());
    }
    bool readable = true;
    if (!m.backend.empty() && catalog_.NeedsPath(m.backend)) {
      readable = CheckModelFile(r, source.field, m.backend, v.path, source.path_text, roots_);
    }
    if (!m.backend.empty()) {
      ModelConfig checked = v;
      if (!readable) checked.path.clear();  // the backend reads no file that failed the checks
      catalog_.ValidateModel(checked, errors_);
      v.task = checked.task;  // the file's, when the entry names none
      CheckIsolation(r, v, catalog_.RunsIsolated(v));
      CheckComputeWait(r, v, catalog_.RunsOpenMp(v));
    }
    v.fingerprint = ModelFingerprint(p, v);
    return v;
  }

  // Where one version comes from: its number, its file, and its own params (versions[] maps).
  struct VersionSource {
    int64_t version = 0;
    fs::path path;
    std::string path_text;  // as written, or as found in a version folder
    std::string field;      // the field errors about its file name ("path", "versions[1].path")
    std::optional<Params> params;
    bool in_folder = false;  // found in (or named after) a version folder of `path`
  };

  // One item of `versions:`: a number, or a {version, path, params} map; nullopt when it is
  // neither (reported).
  std::optional<VersionSource> ReadVersionItem(const Params& p, ParamReader& r, const json& item,
                                               const std::string& field) {
    VersionSource v{.field = "path"};
    if (item.is_number_integer() && item.get<int64_t>() >= 1) {
      v.version = item.get<int64_t>();
      return v;
    }
    if (!item.is_object()) {
      r.Error(field, "a version number (1 or more) or a {version, path, params} map",
              DescribeFound(item));
      return std::nullopt;
    }
    const Params sub = p.Sub(item, r.FieldPath(field));
    ParamReader vr(sub, errors_);
    if (!vr.Has("version")) vr.Error("version", "a version number", "nothing");
    v.version = vr.Int("version", 0, 1, int64_t{1} << 40);
    v.path_text = vr.String("path", "");
    if (!v.path_text.empty()) {
      v.path = Absolute(v.path_text);
      v.field = field + ".path";
    }
    if (auto params = vr.Map("params")) v.params = *params;
    vr.Finish();
    return v;
  }

  // The versions an entry serves: `versions:` (numbers, or {version, path, params} maps),
  // else the numeric subfolders of a `path:` folder, else the one `version:` (default 1) of
  // the one file; then `version_policy:` (all | {latest: N} | {specific: [..]}; the default is
  // all for a list, the latest one for a folder, as Triton does) picks the served ones.
  std::vector<VersionSource> ReadVersions(const Params& p, ParamReader& r, const ModelConfig& m,
                                          const std::string& path_text,
                                          const std::string& model_file) {
    std::error_code ec;
    const bool folder = !path_text.empty() && fs::is_directory(m.path, ec);
    std::vector<VersionSource> found;
    bool list = false;
    if (const json* items = r.Raw("versions")) {
      list = true;
      if (r.Has("version")) {
        (void)r.Raw("version");
        r.Error("version", "either version or versions, not both", "both");
      }
      if (!items->is_array() || items->empty()) {
        r.Error("versions", "a list of version numbers or {version, path, params} maps",
                DescribeFound(*items));
        return {};
      }
      for (size_t i = 0; i < items->size(); ++i) {
        const json& item = (*items)[i];
        const std::string field = "versions[" + std::to_string(i) + "]";
        std::optional<VersionSource> item_source = ReadVersionItem(p, r, item, field);
        if (!item_source || item_source->version < 1) continue;  // reported
        VersionSource& v = *item_source;
        if (v.path_text.empty()) {
          if (folder) {
            v.in_folder = true;
            FindModelFile(r, m, m.path / std::to_string(v.version), model_file, v);
          } else {
            v.path = m.path;
            v.path_text = path_text;
          }
        }
        bool duplicate = false;
        for (const auto& other : found) duplicate = duplicate || other.version == v.version;
        if (duplicate) {
          r.Error(field, "each version once", std::to_string(v.version) + " again");
          continue;
        }
        found.push_back(std::move(v));
      }
    } else if (folder) {
      for (const auto& dirent : fs::directory_iterator(m.path, ec)) {
        const std::string name = dirent.path().filename().string();
        int64_t number = 0;
        auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), number);
        if (err != std::errc() || end != name.data() + name.size() || number < 1 ||
            !dirent.is_directory(ec)) {
          continue;  // not a version folder (Triton ignores them too)
        }
        VersionSource v{.version = number, .field = "path", .in_folder = true};
        FindModelFile(r, m, dirent.path(), model_file, v);
        found.push_back(std::move(v));
      }
      std::sort(found.begin(), found.end(),
                [](const auto& a, const auto& b) { return a.version < b.version; });
      if (found.empty()) {
        r.Error("path", "a model file, or a folder of numeric version folders (1/, 2/, ...)",
                "\"" + m.path.string() + "\" (a folder without version folders)");
      }
      if (r.Has("version")) {
        (void)r.Raw("version");
        r.Error("version", "no version: the folder's version folders are the versions",
                "a version");
      }
    } else {
      found.push_back({.version = r.Int("version", 1, 1, int64_t{1} << 40),
                       .path = m.path,
                       .path_text = path_text,
                       .field = "path"});
    }
    return ApplyVersionPolicy(r, std::move(found), /*all_by_default=*/list || !folder);
  }

  // A version folder's model file: `model_file` when set, else its one .om/.gguf/.onnx file.
  void FindModelFile(ParamReader& r, const ModelConfig& m, const fs::path& dir,
                     const std::string& model_file, VersionSource& v) {
    if (!model_file.empty()) {
      v.path = dir / model_file;
      v.path_text = v.path.string();
      return;
    }
    std::vector<fs::path> candidates;
    std::error_code ec;
    for (const auto& dirent : fs::directory_iterator(dir, ec)) {
      if (dirent.is_regular_file(ec) && IsModelFile(dirent.path())) {
        candidates.push_back(dirent.path());
      }
    }
    if (candidates.size() == 1) {
      v.path = candidates.front();
      v.path_text = v.path.string();
      return;
    }
    if (candidates.empty() && !m.backend.empty() && !catalog_.NeedsPath(m.backend)) return;
    std::vector<std::string> names;
    for (const auto& c : candidates) names.push_back(c.filename().string());
    r.Error("path",
            "a version folder holding one model file (.om, .gguf or .onnx), or model_file "
            "naming it",
            "\"" + dir.string() + "\" (" +
                (names.empty() ? std::string("no model file") : Join(names, ", ")) + ")");
  }

  std::vector<VersionSource> ApplyVersionPolicy(ParamReader& r, std::vector<VersionSource> found,
                                                bool all_by_default) {
    const json* policy = r.Raw("version_policy");
    const std::string expected = "all, {latest: N} or {specific: [versions]}";
    if (!policy) {
      if (!all_by_default && found.size() > 1) found.erase(found.begin(), found.end() - 1);
      return found;
    }
    if (policy->is_string() && policy->get<std::string>() == "all") return found;
    if (!policy->is_object() || policy->size() != 1) {
      r.Error("version_policy", expected, DescribeFound(*policy));
      return found;
    }
    if (policy->contains("latest")) {
      const json& n = (*policy)["latest"];
      if (!n.is_number_integer() || n.get<int64_t>() < 1) {
        r.Error("version_policy.latest", "a count of versions (1 or more)", DescribeFound(n));
        return found;
      }
      const auto keep = static_cast<size_t>(n.get<int64_t>());
      if (found.size() > keep) found.erase(found.begin(), found.end() - static_cast<long>(keep));
      return found;
    }
    if (policy->contains("specific")) {
      const json& list = (*policy)["specific"];
      std::vector<VersionSource> picked;
      if (!list.is_array() || list.empty()) {
        r.Error("version_policy.specific", "a list of versions", DescribeFound(list));
        return found;
      }
      for (const json& v : list) {
        auto it = std::find_if(found.begin(), found.end(), [&](const VersionSource& s) {
          return v.is_number_integer() && s.version == v.get<int64_t>();
        });
        if (it == found.end()) {
          std::vector<int> have;
          for (const auto& s : found) have.push_back(static_cast<int>(s.version));
          r.Error("version_policy.specific", "versions the model has (" + JoinInts(have) + ")",
                  DescribeFound(v));
        } else {
          picked.push_back(*it);
        }
      }
      return picked;
    }
    r.Error("version_policy", expected, DescribeFound(*policy));
    return found;
  }

  // labels: {name: version}; canary: {version, weight}. Both name served versions.
  void ReadRouting(ParamReader& r, ModelConfig& m, const std::vector<VersionSource>& versions) {
    std::vector<int> served;
    for (const auto& v : versions) served.push_back(static_cast<int>(v.version));
    auto is_served = [&](int64_t v) {
      return std::find(served.begin(), served.end(), v) != served.end();
    };
    const std::string served_text = "a served version (" + JoinInts(served) + ")";
    if (auto labels = r.Map("labels")) {
      ParamReader l(*labels, errors_);
      for (const auto& [label, value] : labels->value().items()) {
        const int64_t version = l.Int(label, 0, 1, int64_t{1} << 40);
        if (!IsValidName(label)) {
          l.Error(label, "a label of letters, digits, '_', '-' or '.'", "\"" + label + "\"");
        } else if (version >= 1 && !served.empty() && !is_served(version)) {
          l.Error(label, served_text, std::to_string(version));
        } else if (version >= 1) {
          m.labels[label] = version;
        }
      }
      l.Finish();
    }
    if (auto canary = r.Map("canary")) {
      ParamReader c(*canary, errors_);
      CanaryConfig cc;
      if (!c.Has("version")) c.Error("version", "the canary's version", "nothing");
      cc.version = c.Int("version", 0, 1, int64_t{1} << 40);
      cc.weight = c.Double("weight", 0.1, 0.0, 1.0);
      if (cc.version >= 1 && !served.empty() && !is_served(cc.version)) {
        c.Error("version", served_text, std::to_string(cc.version));
      } else if (cc.version >= 1) {
        m.canary = cc;
      }
      c.Finish();
    }
  }

  // queue: {max_size, levels: {<level>: {max_size, timeout_ms}}}. Reads after timeout_ms.
  void ReadQueue(const Params& queue, ModelConfig& m) {
    ParamReader q(queue, errors_);
    m.queue.max_size = q.Int("max_size", m.queue.max_size, 1, 1'000'000);
    if (auto levels = q.Map("levels")) {
      ParamReader l(*levels, errors_);
      for (const auto& [key, value] : levels->value().items()) {
        int level = 0;
        auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), level);
        if (ec != std::errc() || end != key.data() + key.size() || level < 1 ||
            level > kMaxPriorityLevel) {
          (void)l.Raw(key);
          l.Error(key, "a priority level in 1.." + std::to_string(kMaxPriorityLevel),
                  "\"" + key + "\"");
          continue;
        }
        auto policy = l.Map(key);
        if (!policy) continue;
        ParamReader p(*policy, errors_);
        LevelPolicy& lp = m.queue.levels[level];
        lp.max_size = p.Int("max_size", m.queue.max_size, 1, 1'000'000);
        lp.timeout = std::chrono::milliseconds(
            p.Int("timeout_ms", m.timeout.count(), 1, kMaxTimeoutMs));
        p.Finish();
      }
      l.Finish();
    }
    q.Finish();
  }

  void ResolveBackend(ParamReader& r, ModelConfig& m, const std::string& path_text) {
    const auto names = catalog_.BackendNames();
    if (!m.backend.empty()) {
      if (std::find(names.begin(), names.end(), m.backend) == names.end()) {
        const auto closest = ClosestMatch(m.backend, names);
        r.Error("backend", "one of " + Join(names, ", "), "\"" + m.backend + "\"",
                closest.empty() ? "" : "did you mean '" + closest + "'?");
        m.backend.clear();
      }
      return;
    }
    static const std::map<std::string, std::string> kByExtension = {
        {".om", "acl"}, {".gguf", "llama"}, {".onnx", "opencv"}};
    const std::string ext = fs::path(path_text).extension().string();
    if (auto it = kByExtension.find(ext); it != kByExtension.end()) {
      m.backend = it->second;
    } else {
      r.Error("backend",
              "a backend (one of " + Join(names, ", ") +
                  "), or a path ending in .om, .gguf or .onnx to infer it from",
              path_text.empty() ? "neither" : "path \"" + path_text + "\"");
    }
  }

  // The rules every version shares; each version's file and params are checked on their own.
  // `execution: inline` runs each request alone on the thread that received it: nothing to
  // batch, and no worker threads to size, pin or renice.
  void CheckInlineRules(ParamReader& r, const ModelConfig& m) {
    const std::string why = " with execution: inline (requests run on the server's threads)";
    if (m.max_batch != 1) r.Error("max_batch", "1" + why, std::to_string(m.max_batch));
    if (r.Has("thread_num")) {
      r.Error("thread_num", "no thread_num" + why, std::to_string(m.thread_num));
    }
    if (!m.cpu_affinity.empty()) {
      r.Error("cpu_affinity", "no pinning" + why, "[" + JoinInts(m.cpu_affinity) + "]");
    }
    if (m.nice != 0) r.Error("nice", "no nice value" + why, std::to_string(m.nice));
  }

  void CheckModelRules(ParamReader& r, ModelConfig& m) {
    if (m.max_batch < m.batch_size) {
      r.Error("max_batch", "at least batch_size (" + std::to_string(m.batch_size) + ")",
              std::to_string(m.max_batch));
    }
    if (!m.batch_tiers.empty()) {
      const auto& t = m.batch_tiers;
      if (!std::is_sorted(t.begin(), t.end()) ||
          std::adjacent_find(t.begin(), t.end()) != t.end()) {
        r.Error("batch_tiers", "batch sizes in ascending order, each once",
                "[" + JoinInts(t) + "]");
      } else if (t.back() != m.max_batch) {
        r.Error("batch_tiers",
                "a largest tier equal to max_batch (" + std::to_string(m.max_batch) + ")",
                std::to_string(t.back()));
      }
    }
    if (m.backend.empty()) return;  // already reported
    const auto tasks = catalog_.Tasks(m.backend);
    if (m.task.empty() && !tasks.empty()) {
      m.task = tasks.front();
    } else if (std::find(tasks.begin(), tasks.end(), m.task) == tasks.end()) {
      r.Error("task", "one of " + Join(tasks, ", ") + " for backend " + m.backend,
              "\"" + m.task + "\"");
    }
    if (m.execute_inline && !catalog_.ExecutesInline(m)) {
      r.Error("execution",
              "worker for backend " + m.backend +
                  " (inline needs executions that never block: the identity backend without "
                  "latency or hang injection)",
              "\"inline\"");
    }
    if (auto count = catalog_.DeviceCount(m.backend); count && m.device_id >= *count) {
      r.Error("device_id",
              "a device id in 0.." + std::to_string(*count - 1) + " (backend " + m.backend +
                  " sees " + std::to_string(*count) + " device" + (*count == 1 ? "" : "s") + ")",
              std::to_string(m.device_id));
    }
  }

  std::string file_;
  const BackendCatalog& catalog_;
  fs::path base_dir_;
  bool generated_ = false;
  ConfigErrors errors_;
  std::map<std::string, SourceLocation> names_;
  const std::vector<fs::path>* roots_ = nullptr;  // set for a client's entry
};

}  // namespace

Result<ServerConfig> ParseConfig(const std::string& yaml, const std::string& file,
                                 const BackendCatalog& catalog) {
  return Parser(file, catalog).Run(yaml);
}

Result<std::vector<ModelConfig>> ParseModelEntry(const nlohmann::json& entry,
                                                 const ServerConfig& config,
                                                 const BackendCatalog& catalog) {
  return Parser(config.file, catalog).RunEntry(entry, config.global);
}

Result<ServerConfig> LoadModelArgs(const std::vector<std::string>& models,
                                   const std::vector<std::string>& tasks,
                                   const BackendCatalog& catalog) {
  MMS_ASSIGN_OR_RETURN(const auto args, ParseModelArgs(models, tasks));
  MMS_ASSIGN_OR_RETURN(ServerConfig config,
                       Parser("--model", catalog, /*generated=*/true).Run(ModelArgsYaml(args)));
  config.file.clear();
  return config;
}

Result<ServerConfig> LoadConfigFile(const std::filesystem::path& file,
                                    const BackendCatalog& catalog,
                                    const std::string& model_name) {
  std::error_code ec;
  if (fs::is_directory(file, ec) || IsModelFile(file)) {
    MMS_ASSIGN_OR_RETURN(const std::string yaml, ModelDirYaml(file, model_name));
    MMS_ASSIGN_OR_RETURN(ServerConfig config,
                         Parser(file.string(), catalog, /*generated=*/true).Run(yaml));
    config.model_name = model_name;
    return config;
  }
  if (!model_name.empty()) {
    return InvalidArgument("--model-name names the model of a model directory; " +
                           file.string() + " is a file");
  }
  std::ifstream in(file);
  if (!in) return NotFound("cannot read config file " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), file.string(), catalog);
}

}  // namespace mmserve
