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

#include <yaml-cpp/yaml.h>

#include "common/json.h"
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

// A plain YAML number as YAML 1.2's core schema reads it: [-+]?digits, or a decimal fraction with
// an optional exponent. Scanned by hand (linear; std::regex recursed once per character).
bool IsYamlInteger(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsYamlFloat(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  size_t i = 0, digits = 0;
  const auto is_digit = [&] { return i < s.size() && s[i] >= '0' && s[i] <= '9'; };
  while (is_digit()) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (is_digit()) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!is_digit()) return false;
    while (is_digit()) ++i;
  }
  return i == s.size();
}

json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  if (text.empty() || text == "~" || text == "null") return nullptr;
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  if (IsYamlInteger(text)) {
    // Too large for an integer: keep the text; the typed reader reports it.
    if (auto n = ParseInt64(text)) return *n;
    return text;
  }
  if (IsYamlFloat(text)) {
    errno = 0;
    const double d = std::strtod(text.c_str(), nullptr);
    if (errno != ERANGE && std::isfinite(d)) return d;
  }
  return text;
}

// Converts the YAML tree to JSON with a location per field path. Strings must be text: a NUL or
// invalid UTF-8 is an error at its position (both would break every consumer of the name, path
// or message). yaml-cpp bounds the nesting (DeepRecursion), so the recursion here is bounded too.
class TreeBuilder {
 public:
  TreeBuilder(const std::string& file, Params::Locations& locations, ConfigErrors& errors)
      : file_(file), locations_(locations), errors_(errors) {}

  json Build(const YAML::Node& node, const std::string& path) {
    locations_[path] = ToLocation(file_, node.Mark());
    switch (node.Type()) {
      case YAML::NodeType::Map: {
        json out = json::object();
        for (const auto& kv : node) {
          const std::string key = kv.first.Scalar();
          CheckText(key, path.empty() ? "(key)" : path + ".(key)", kv.first.Mark());
          const std::string child = path.empty() ? key : path + "." + key;
          out[key] = Build(kv.second, child);
          locations_[Params::KeyPath(child)] = ToLocation(file_, kv.first.Mark());
          if (locations_[child].line == 0) locations_[child] = locations_[Params::KeyPath(child)];
        }
        return out;
      }
      case YAML::NodeType::Sequence: {
        json out = json::array();
        for (size_t i = 0; i < node.size(); ++i) {
          out.push_back(Build(node[i], path + "[" + std::to_string(i) + "]"));
        }
        return out;
      }
      case YAML::NodeType::Scalar:
        CheckText(node.Scalar(), path.empty() ? "(document)" : path, node.Mark());
        return ScalarToJson(node);
      default:
        return nullptr;
    }
  }

 private:
  void CheckText(const std::string& text, const std::string& field, const YAML::Mark& mark) {
    std::string problem;
    if (text.find('\0') != std::string::npos) {
      problem = "a NUL character";
    } else if (!IsValidUtf8(text)) {
      problem = "bytes that are not UTF-8";
    } else {
      return;
    }
    errors_.Add({.where = ToLocation(file_, mark),
                 .field = Abbreviate(ToValidUtf8(field), 80),
                 .expected = "UTF-8 text",
                 .found = problem});
  }

  const std::string& file_;
  Params::Locations& locations_;
  ConfigErrors& errors_;
};

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
    r.Error(key,
            "a duration (seconds, or \"500ms\", \"30s\", \"5m\", \"1h\"; at most 100 years; "
            "-1 = forever)",
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

// Stage names: the forms the preprocess/postprocess stages understand, matched by hand (a cursor
// over the text; linear, no backtracking).
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool Lit(std::string_view word) {
    if (s_.substr(0, word.size()) != word) return false;
    s_.remove_prefix(word.size());
    return true;
  }
  bool Digits(bool nonzero_first) {  // [1-9][0-9]* or [0-9]+
    size_t n = 0;
    while (n < s_.size() && s_[n] >= '0' && s_[n] <= '9') ++n;
    if (n == 0 || (nonzero_first && s_[0] == '0')) return false;
    s_.remove_prefix(n);
    return true;
  }
  bool Positive() { return Digits(true); }
  bool Done() const { return s_.empty(); }

 private:
  std::string_view s_;
};

struct StageForm {
  const char* name;
  bool (*matches)(Cursor);
};

void CheckStage(ParamReader& r, const std::string& key, const std::string& value,
                const std::vector<StageForm>& forms) {
  if (value.empty()) return;
  std::vector<std::string> names;
  for (const auto& form : forms) {
    if (form.matches(Cursor(value))) return;
    names.push_back(form.name);
  }
  r.Error(key, "one of " + Join(names, ", "), "\"" + Abbreviate(value) + "\"");
}

const std::vector<StageForm>& PreprocessForms() {
  static const std::vector<StageForm> kForms = {
      {"none", [](Cursor c) { return c.Lit("none") && c.Done(); }},
      {"resize_<N>", [](Cursor c) { return c.Lit("resize_") && c.Positive() && c.Done(); }},
      {"resize_<W>x<H>",
       [](Cursor c) {
         return c.Lit("resize_") && c.Positive() && c.Lit("x") && c.Positive() && c.Done();
       }},
      {"resize_<N>_center_crop[_<C>]",
       [](Cursor c) {
         if (!(c.Lit("resize_") && c.Positive() && c.Lit("_center_crop"))) return false;
         return c.Done() || (c.Lit("_") && c.Positive() && c.Done());
       }},
      {"letterbox_<N>", [](Cursor c) { return c.Lit("letterbox_") && c.Positive() && c.Done(); }},
  };
  return kForms;
}

const std::vector<StageForm>& PostprocessForms() {
  static const std::vector<StageForm> kForms = {
      {"none", [](Cursor c) { return c.Lit("none") && c.Done(); }},
      {"softmax", [](Cursor c) { return c.Lit("softmax") && c.Done(); }},
      {"sigmoid", [](Cursor c) { return c.Lit("sigmoid") && c.Done(); }},
      {"argmax", [](Cursor c) { return c.Lit("argmax") && c.Done(); }},
      {"topk_<K>", [](Cursor c) { return c.Lit("topk_") && c.Positive() && c.Done(); }},
      {"nms_threshold_<0..1>",
       [](Cursor c) {
         if (!c.Lit("nms_threshold_")) return false;
         if (c.Lit("1")) {  // 1, 1., 1.000
           if (c.Done()) return true;
           if (!c.Lit(".")) return false;
           while (c.Lit("0")) {
           }
           return c.Done();
         }
         c.Lit("0");  // 0.45 or .45
         return c.Lit(".") && c.Digits(false) && c.Done();
       }},
  };
  return kForms;
}

// Model and label names: letters, digits, '_', '-' or '.', and not "." or ".." (a name becomes a
// URL segment and may become a file name).
bool IsValidName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c == '.';
  });
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
      tree = TreeBuilder(file_, *locations, errors_).Build(root, "");
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
      for (auto& version : ReadModel(m, config.global)) config.models.push_back(std::move(version));
    }
    top.Finish();
    if (config.global.model_roots.empty()) {
      std::error_code ec;
      config.global.model_roots.push_back(
          fs::weakly_canonical(base_dir_.empty() ? fs::current_path(ec) : base_dir_, ec));
    }
    if (top.Has("models") && tree["models"].is_array() && tree["models"].empty()) {
      top.Error("models", "at least one model", "an empty list");
    }
    MMS_RETURN_IF_ERROR(errors_.ToStatus());
    return config;
  }

  Result<std::vector<ModelConfig>> RunEntry(const json& entry, const GlobalConfig& global) {
    const Params p(entry, "config", std::make_shared<Params::Locations>());
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
    g.priority_linger = ReadDuration(r, "priority_linger", g.priority_linger)
                            .value_or(std::chrono::milliseconds(kMaxTimeoutMs));
    g.log_level = r.String("log_level", g.log_level,
                           {"trace", "debug", "info", "warn", "error", "critical", "off"});
    if (auto jobs = r.Map("jobs")) {
      ParamReader j(*jobs, errors_);
      g.jobs.max = j.Int("max", g.jobs.max, 1, 1'000'000);
      g.jobs.ttl = ReadDuration(j, "ttl", g.jobs.ttl).value_or(std::chrono::milliseconds(kMaxTimeoutMs));
      j.Finish();
    }
    if (const json* roots = r.Raw("model_roots")) {
      if (!roots->is_array()) {
        r.Error("model_roots", "a list of folders", DescribeFound(*roots));
      } else {
        for (size_t i = 0; i < roots->size(); ++i) {
          const json& root = (*roots)[i];
          const std::string field = "model_roots[" + std::to_string(i) + "]";
          std::error_code ec;
          if (!root.is_string() || root.get<std::string>().empty()) {
            r.Error(field, "a folder", DescribeFound(root));
          } else if (fs::path dir = Absolute(root.get<std::string>()); !fs::is_directory(dir, ec)) {
            r.Error(field, "an existing folder", "\"" + dir.string() + "\"");
          } else {
            g.model_roots.push_back(fs::weakly_canonical(dir, ec));
          }
        }
      }
    }
    g.watch = ReadDuration(r, "watch", std::nullopt);
    if (g.watch && g.watch->count() == 0) g.watch.reset();
    if (r.Has("grpc_port")) g.grpc_port = static_cast<int>(r.Int("grpc_port", 0, 0, 65535));
    g.api_key = r.String("api_key", g.api_key);
    g.admin_key = r.String("admin_key", g.admin_key);
    g.max_connections = static_cast<int>(r.Int("max_connections", g.max_connections, 1, 1 << 20));
    g.max_in_flight = r.Int("max_in_flight", g.max_in_flight, 0, int64_t{1} << 30);
    if (const json* origins = r.Raw("cors_origins")) {
      if (!origins->is_array()) {
        r.Error("cors_origins", "a list of origins such as \"https://app.example.com\" or \"*\"",
                DescribeFound(*origins));
      } else {
        for (size_t i = 0; i < origins->size(); ++i) {
          const json& o = (*origins)[i];
          if (!o.is_string() || o.get<std::string>().empty()) {
            r.Error("cors_origins[" + std::to_string(i) + "]", "an origin", DescribeFound(o));
          } else {
            g.cors_origins.push_back(o.get<std::string>());
          }
        }
      }
    }
    r.Finish();
    return g;
  }

  fs::path Absolute(const std::string& text) const {
    return fs::path(text).is_absolute() ? fs::path(text) : base_dir_ / text;
  }

  // One ModelConfig per served version of the entry `p`.
  std::vector<ModelConfig> ReadModel(const Params& p, const GlobalConfig& global) {
    ParamReader r(p, errors_);
    ModelConfig m;
    m.where = p.LocationOf(p.path());
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
    m.device_id = static_cast<int>(r.Int("device_id", global.device, 0, 1023));
    m.batch_size = static_cast<int>(r.Int("batch_size", m.batch_size, 1, 4096));
    m.max_batch = static_cast<int>(r.Int("max_batch", std::max(m.batch_size, 1), 1, 4096));
    m.max_batch_set = r.Has("max_batch");
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
    m.execute_inline = r.String("execution", "worker", {"worker", "inline"}) == "inline";
    if (m.execute_inline) CheckInlineRules(r, m);
    if (auto params = r.Map("params")) m.params = *params;
    ReadRouting(r, m, versions);
    r.Finish();
    CheckModelRules(r, m);
    std::vector<ModelConfig> out;
    for (const VersionSource& source : versions) {
      ModelConfig v = m;
      v.version = source.version;
      v.path = source.path;
      if (source.in_folder) v.versions_dir = m.path;
      if (source.params) {
        nlohmann::json merged = m.params.value();
        for (const auto& [key, value] : source.params->value().items()) merged[key] = value;
        v.params = source.params->Sub(std::move(merged), source.params->path());
      }
      if (!m.backend.empty() && catalog_.NeedsPath(m.backend)) {
        CheckPath(r, source.field, v, source.path_text);
      }
      if (!m.backend.empty()) catalog_.ValidateModel(v, errors_);
      v.fingerprint = Fingerprint(p, v);
      out.push_back(std::move(v));
    }
    return out;
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
        VersionSource v{.field = "path"};
        if (item.is_number_integer() && item.get<int64_t>() >= 1) {
          v.version = item.get<int64_t>();
        } else if (item.is_object()) {
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
        } else {
          r.Error(field, "a version number (1 or more) or a {version, path, params} map",
                  DescribeFound(item));
          continue;
        }
        if (v.version < 1) continue;  // reported
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
      const std::string ext = dirent.path().extension().string();
      if (dirent.is_regular_file(ec) && (ext == ".om" || ext == ".gguf" || ext == ".onnx")) {
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

  // The version's load-relevant description: the entry without its routing keys, plus what was
  // resolved for this version, plus its file's size and modification time.
  static std::string Fingerprint(const Params& entry, const ModelConfig& v) {
    json j = entry.value();
    for (const char* key : {"labels", "canary", "version_policy", "versions"}) j.erase(key);
    j["=version"] = v.version;
    j["=path"] = v.path.string();
    j["=params"] = v.params.value();
    j["=device"] = v.device_id;
    j["=keep_alive"] = v.keep_alive ? v.keep_alive->count() : -1;
    std::error_code ec;
    if (!v.path.empty() && fs::is_regular_file(v.path, ec)) {
      j["=size"] = static_cast<int64_t>(fs::file_size(v.path, ec));
      j["=mtime"] = static_cast<int64_t>(fs::last_write_time(v.path, ec).time_since_epoch().count());
    }
    return DumpJson(j);
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

  void CheckPath(ParamReader& r, const std::string& field, const ModelConfig& m,
                 const std::string& path_text) {
    if (path_text.empty()) {
      if (field == "path") r.Error(field, "the model file for backend " + m.backend, "nothing");
      return;  // a version folder without a file: already reported
    }
    std::error_code ec;
    const auto status = fs::status(m.path, ec);
    if (ec || !fs::exists(status)) {
      r.Error(field, "an existing file", "\"" + m.path.string() + "\" (no such file)");
    } else if (::access(m.path.c_str(), R_OK) != 0) {
      r.Error(field, "a readable file", "\"" + m.path.string() + "\" (permission denied)");
    } else if (!fs::is_regular_file(status)) {
      r.Error(field, "a model file", "\"" + m.path.string() + "\" (not a regular file)");
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
  std::string_view number = text;
  int64_t factor = 1000;  // seconds without a unit
  for (const auto& [unit, ms] : {std::pair<std::string_view, int64_t>{"ms", 1}, {"s", 1000},
                                 {"m", 60'000}, {"h", 3'600'000}}) {
    if (number.size() > unit.size() && number.ends_with(unit)) {
      number.remove_suffix(unit.size());
      factor = ms;
      break;
    }
  }
  const bool has_unit = number.size() != text.size();
  if (number.empty() || number[0] == '+') return std::nullopt;
  const auto n = ParseInt64(number);
  if (!n) return std::nullopt;
  if (*n < 0) {
    if (*n == -1 && !has_unit) return std::optional<std::chrono::milliseconds>();
    return std::nullopt;
  }
  // Bounded so that now + duration never overflows a clock (steady_clock counts nanoseconds).
  const auto ms = CheckedMul(*n, factor);
  if (!ms || *ms > kMaxDurationMs) return std::nullopt;
  return std::optional<std::chrono::milliseconds>(std::chrono::milliseconds(*ms));
}

Result<ServerConfig> ParseConfig(const std::string& yaml, const std::string& file,
                                 const BackendCatalog& catalog) {
  return Parser(file, catalog).Run(yaml);
}

Result<std::vector<ModelConfig>> ParseModelEntry(const nlohmann::json& entry,
                                                 const ServerConfig& config,
                                                 const BackendCatalog& catalog) {
  return Parser(config.file, catalog).RunEntry(entry, config.global);
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
