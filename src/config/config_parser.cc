#include "config/config_parser.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "common/strings.h"

namespace mmserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kMaxTimeoutMs = 3'600'000;

// ---- YAML → (json tree, location table) ------------------------------------------------------

SourceLocation ToLocation(const std::string& file, const YAML::Mark& mark) {
  if (mark.line < 0) return {.file = file};
  return {.file = file, .line = mark.line + 1, .column = mark.column + 1};
}

json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  if (text.empty() || text == "~" || text == "null") return nullptr;
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  static const std::regex kInt(R"([-+]?[0-9]+)");
  static const std::regex kFloat(R"([-+]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?)");
  try {
    if (std::regex_match(text, kInt)) return std::stoll(text);
    if (std::regex_match(text, kFloat)) return std::stod(text);
  } catch (const std::out_of_range&) {
    // Too large for a number: keep the text; the typed reader reports it.
  }
  return text;
}

json ToJson(const YAML::Node& node, const std::string& path, const std::string& file,
            Params::Locations& locations) {
  locations[path] = ToLocation(file, node.Mark());
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) {
        const std::string key = kv.first.Scalar();
        const std::string child = path.empty() ? key : path + "." + key;
        out[key] = ToJson(kv.second, child, file, locations);
        locations[Params::KeyPath(child)] = ToLocation(file, kv.first.Mark());
        if (locations[child].line == 0) locations[child] = locations[Params::KeyPath(child)];
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        out.push_back(ToJson(node[i], path + "[" + std::to_string(i) + "]", file, locations));
      }
      return out;
    }
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    default:
      return nullptr;
  }
}

std::string JoinInts(const std::vector<int>& values) {
  std::vector<std::string> parts;
  for (int v : values) parts.push_back(std::to_string(v));
  return Join(parts, ", ");
}

// ---- field readers shared by global and models ---------------------------------------------

std::optional<std::chrono::milliseconds> ReadDuration(
    ParamReader& r, const std::string& key,
    std::optional<std::chrono::milliseconds> fallback) {
  const json* v = r.Raw(key);
  if (!v) return fallback;
  std::optional<std::optional<std::chrono::milliseconds>> parsed;
  if (v->is_number_integer()) {
    parsed = ParseDuration(std::to_string(v->get<int64_t>()));
  } else if (v->is_string()) {
    parsed = ParseDuration(v->get<std::string>());
  }
  if (!parsed) {
    r.Error(key, "a duration (seconds, or \"500ms\", \"30s\", \"5m\", \"1h\"; -1 = forever)",
            DescribeFound(*v));
    return fallback;
  }
  return *parsed;
}

int ReadPriority(ParamReader& r) {
  const json* v = r.Raw("priority");
  if (!v) return kDefaultPriority;
  if (v->is_string()) {
    static const std::map<std::string, int> kNames = {{"high", 1}, {"normal", 2}, {"low", 3}};
    if (auto it = kNames.find(v->get<std::string>()); it != kNames.end()) return it->second;
  } else if (v->is_number_integer() && v->get<int64_t>() >= 1 &&
             v->get<int64_t>() <= kMaxPriorityLevel) {
    return static_cast<int>(v->get<int64_t>());
  }
  r.Error("priority",
          "high, normal, low or a level in 1.." + std::to_string(kMaxPriorityLevel) +
              " (1 is highest)",
          DescribeFound(*v));
  return kDefaultPriority;
}

// Stage names: the forms the preprocess/postprocess stages understand.
void CheckStage(ParamReader& r, const std::string& key, const std::string& value,
                const std::vector<std::pair<std::regex, std::string>>& forms) {
  if (value.empty()) return;
  std::vector<std::string> names;
  for (const auto& [pattern, name] : forms) {
    if (std::regex_match(value, pattern)) return;
    names.push_back(name);
  }
  r.Error(key, "one of " + Join(names, ", "), "\"" + value + "\"");
}

const std::vector<std::pair<std::regex, std::string>>& PreprocessForms() {
  static const std::vector<std::pair<std::regex, std::string>> kForms = {
      {std::regex("none"), "none"},
      {std::regex("resize_[1-9][0-9]*"), "resize_<N>"},
      {std::regex("resize_[1-9][0-9]*x[1-9][0-9]*"), "resize_<W>x<H>"},
      {std::regex("resize_[1-9][0-9]*_center_crop(_[1-9][0-9]*)?"),
       "resize_<N>_center_crop[_<C>]"},
      {std::regex("letterbox_[1-9][0-9]*"), "letterbox_<N>"},
  };
  return kForms;
}

const std::vector<std::pair<std::regex, std::string>>& PostprocessForms() {
  static const std::vector<std::pair<std::regex, std::string>> kForms = {
      {std::regex("none"), "none"},
      {std::regex("softmax"), "softmax"},
      {std::regex("sigmoid"), "sigmoid"},
      {std::regex("argmax"), "argmax"},
      {std::regex("topk_[1-9][0-9]*"), "topk_<K>"},
      {std::regex("nms_threshold_(0?\\.[0-9]+|1(\\.0*)?)"), "nms_threshold_<0..1>"},
  };
  return kForms;
}

// ---- the parser ------------------------------------------------------------------------------

class Parser {
 public:
  Parser(const std::string& file, const BackendCatalog& catalog)
      : file_(file), catalog_(catalog), base_dir_(fs::path(file).parent_path()) {}

  Result<ServerConfig> Run(const std::string& yaml) {
    auto locations = std::make_shared<Params::Locations>();
    json tree;
    try {
      YAML::Node root = YAML::Load(yaml);
      if (!root.IsDefined() || root.IsNull()) {
        root = YAML::Node(YAML::NodeType::Map);
      }
      tree = ToJson(root, "", file_, *locations);
    } catch (const YAML::Exception& e) {
      errors_.Add({.where = ToLocation(file_, e.mark),
                   .field = "(document)",
                   .expected = "valid YAML",
                   .found = e.msg});
      return errors_.ToStatus();
    }
    ServerConfig config;
    config.file = file_;
    const Params root(tree, "", locations);
    if (!tree.is_object()) {
      errors_.Add({.where = root.LocationOf(""),
                   .field = "(document)",
                   .expected = "a map with 'global' and 'models'",
                   .found = DescribeFound(tree)});
      return errors_.ToStatus();
    }
    ParamReader top(root, errors_);
    if (auto global = top.Map("global")) config.global = ReadGlobal(*global);
    if (!top.Has("models")) {
      top.Error("models", "a list of models", "nothing");
    }
    for (const Params& m : top.MapList("models")) {
      config.models.push_back(ReadModel(m, config.global));
    }
    top.Finish();
    if (top.Has("models") && tree["models"].is_array() && tree["models"].empty()) {
      top.Error("models", "at least one model", "an empty list");
    }
    MMS_RETURN_IF_ERROR(errors_.ToStatus());
    return config;
  }

 private:
  GlobalConfig ReadGlobal(const Params& p) {
    ParamReader r(p, errors_);
    GlobalConfig g;
    g.device = static_cast<int>(r.Int("device", g.device, 0, 1023));
    g.memory_pool_mb = r.Int("memory_pool", g.memory_pool_mb, 0, int64_t{1} << 30);
    g.memory_headroom = r.Double("memory_headroom", g.memory_headroom, 0.01, 1.0);
    if (auto preflight = r.Map("preflight")) {
      ParamReader p(*preflight, errors_);
      g.preflight.factor = p.Double("factor", g.preflight.factor, 1.0, 10.0);
      g.preflight.max_fill = p.Double("max_fill", g.preflight.max_fill, 0.01, 1.0);
      p.Finish();
    }
    g.thread_num = static_cast<int>(r.Int("thread_num", g.thread_num, 1, 1024));
    g.host = r.String("host", g.host);
    g.port = static_cast<int>(r.Int("port", g.port, 0, 65535));
    g.max_request_mb = r.Int("max_request_mb", g.max_request_mb, 1, 4096);
    g.keep_alive = ReadDuration(r, "keep_alive", g.keep_alive);
    g.drain_timeout = ReadDuration(r, "drain_timeout", g.drain_timeout)
                          .value_or(std::chrono::milliseconds(kMaxTimeoutMs));
    g.log_level = r.String("log_level", g.log_level,
                           {"trace", "debug", "info", "warn", "error", "critical", "off"});
    if (auto jobs = r.Map("jobs")) {
      ParamReader j(*jobs, errors_);
      g.jobs.max = j.Int("max", g.jobs.max, 1, 1'000'000);
      g.jobs.ttl = ReadDuration(j, "ttl", g.jobs.ttl).value_or(std::chrono::milliseconds(kMaxTimeoutMs));
      j.Finish();
    }
    r.Finish();
    return g;
  }

  ModelConfig ReadModel(const Params& p, const GlobalConfig& global) {
    ParamReader r(p, errors_);
    ModelConfig m;
    m.where = p.LocationOf(p.path());
    m.name = r.String("name", "");
    if (!r.Has("name")) {
      r.Error("name", "a model name", "nothing");
    } else if (!m.name.empty() && !std::regex_match(m.name, std::regex("[A-Za-z0-9_.-]+"))) {
      r.Error("name", "letters, digits, '_', '-' or '.'", "\"" + m.name + "\"");
    } else if (auto [it, inserted] = names_.emplace(m.name, m.where); !inserted) {
      r.Error("name", "a unique model name (first defined at " + it->second.ToString() + ")",
              "\"" + m.name + "\" again");
    }
    const std::string path_text = r.String("path", "");
    m.backend = r.String("backend", "");
    if (!path_text.empty()) {
      m.path = fs::path(path_text).is_absolute() ? fs::path(path_text) : base_dir_ / path_text;
    }
    ResolveBackend(r, m, path_text);
    m.task = r.String("task", "");
    m.version = r.Int("version", m.version, 1, int64_t{1} << 40);
    m.device_id = static_cast<int>(r.Int("device_id", global.device, 0, 1023));
    m.batch_size = static_cast<int>(r.Int("batch_size", m.batch_size, 1, 4096));
    m.max_batch = static_cast<int>(r.Int("max_batch", std::max(m.batch_size, 1), 1, 4096));
    m.dynamic_batch = r.Bool("dynamic_batch", m.dynamic_batch);
    for (int64_t tier : r.IntList("batch_tiers", 1, 4096)) {
      m.batch_tiers.push_back(static_cast<int>(tier));
    }
    if (r.Has("batch_tiers") && !r.Has("max_batch") && !m.batch_tiers.empty()) {
      m.max_batch = *std::max_element(m.batch_tiers.begin(), m.batch_tiers.end());
    }
    m.preserve_ordering = r.Bool("preserve_ordering", m.preserve_ordering);
    m.max_queue_delay =
        std::chrono::milliseconds(r.Int("max_queue_delay_ms", m.max_queue_delay.count(), 0, 60'000));
    m.preprocess = r.String("preprocess", "");
    CheckStage(r, "preprocess", m.preprocess, PreprocessForms());
    m.postprocess = r.String("postprocess", "");
    CheckStage(r, "postprocess", m.postprocess, PostprocessForms());
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
    if (auto params = r.Map("params")) m.params = *params;
    r.Finish();
    CheckModelRules(r, m, path_text);
    return m;
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

  void CheckModelRules(ParamReader& r, ModelConfig& m, const std::string& path_text) {
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
    if (catalog_.NeedsPath(m.backend)) {
      CheckPath(r, m, path_text);
    }
    if (auto count = catalog_.DeviceCount(m.backend); count && m.device_id >= *count) {
      r.Error("device_id",
              "a device id in 0.." + std::to_string(*count - 1) + " (backend " + m.backend +
                  " sees " + std::to_string(*count) + " device" + (*count == 1 ? "" : "s") + ")",
              std::to_string(m.device_id));
    }
    catalog_.ValidateModel(m, errors_);
  }

  void CheckPath(ParamReader& r, const ModelConfig& m, const std::string& path_text) {
    if (path_text.empty()) {
      r.Error("path", "the model file for backend " + m.backend, "nothing");
      return;
    }
    std::error_code ec;
    const auto status = fs::status(m.path, ec);
    if (ec || !fs::exists(status)) {
      r.Error("path", "an existing file", "\"" + m.path.string() + "\" (no such file)");
    } else if (::access(m.path.c_str(), R_OK) != 0) {
      r.Error("path", "a readable file", "\"" + m.path.string() + "\" (permission denied)");
    } else if (!fs::is_regular_file(status) && !fs::is_directory(status)) {
      r.Error("path", "a file or a version directory", "\"" + m.path.string() + "\"");
    }
  }

  std::string file_;
  const BackendCatalog& catalog_;
  fs::path base_dir_;
  ConfigErrors errors_;
  std::map<std::string, SourceLocation> names_;
};

}  // namespace

std::optional<std::optional<std::chrono::milliseconds>> ParseDuration(const std::string& text) {
  static const std::regex kDuration(R"((-?[0-9]+)(ms|s|m|h)?)");
  std::smatch match;
  if (!std::regex_match(text, match, kDuration)) return std::nullopt;
  const int64_t n = std::stoll(match[1].str());
  if (n < 0) {
    if (n == -1 && !match[2].matched) return std::optional<std::chrono::milliseconds>();
    return std::nullopt;
  }
  const std::string unit = match[2].matched ? match[2].str() : "s";
  const int64_t factor = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60'000 : 3'600'000;
  return std::optional<std::chrono::milliseconds>(std::chrono::milliseconds(n * factor));
}

Result<ServerConfig> ParseConfig(const std::string& yaml, const std::string& file,
                                 const BackendCatalog& catalog) {
  return Parser(file, catalog).Run(yaml);
}

Result<ServerConfig> LoadConfigFile(const std::filesystem::path& file,
                                    const BackendCatalog& catalog) {
  std::ifstream in(file);
  if (!in) return NotFound("cannot read config file " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), file.string(), catalog);
}

}  // namespace mmserve
